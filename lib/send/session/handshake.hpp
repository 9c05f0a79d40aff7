#pragma once
// Opening of every connection (docs/protocol.md, "Handshake").
#include <array>
#include <string>

#include "core/io/unique_fd.hpp"
#include "core/wire/protocol.hpp"

namespace sluice {

// Sender side: reads the receiver's hello, sends ours with its MAC, checks the receiver's
// answer (and its MAC, so a sender never streams data to an impostor). Throws auth or
// protocol Errors naming the address. hello.features holds the features this sender would
// use; it sends those the receiver's hello offers (and its encryption bit in any case).
// Returns them, and the PSK of the connection's TLS handshake (used when hello.features asks
// for encryption). A receiver that encrypts when we do not, or the reverse, is refused (auth)
// with a message naming the option on each side.
struct HelloResult {
    std::array<unsigned char, 32> psk{};
    uint8_t features = 0;
};
HelloResult client_handshake(int fd, const std::string& token, wire::ClientHello hello, const std::string& peer);

} // namespace sluice
