#pragma once
// Opening of every connection (docs/protocol.md, "Handshake").
#include <string>

#include "core/io/unique_fd.hpp"
#include "core/wire/protocol.hpp"

namespace sluice {

// Sender side: reads the receiver's hello, sends ours with its MAC, checks the receiver's
// answer (and its MAC, so a sender never streams data to an impostor). Throws auth or
// protocol Errors naming the address. hello.features holds the features this sender would
// use; it sends those the receiver's hello offers and returns them.
uint8_t client_handshake(int fd, const std::string& token, wire::ClientHello hello, const std::string& peer);

} // namespace sluice
