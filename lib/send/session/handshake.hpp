#pragma once
// Opening of every connection (docs/protocol.md, "Handshake").
#include <array>
#include <functional>
#include <optional>
#include <string>

#include "core/io/unique_fd.hpp"
#include "sluice/error.hpp"
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
    uint16_t offered = 0; // the receiver's ServerHello features (bits past ClientHello's u8 included)
};
// sent(), if given, runs once our hello is written, before the receiver's answer is read.
HelloResult client_handshake(int fd, const std::string& token, wire::ClientHello hello, const std::string& peer,
                             const std::function<void()>& sent = {});

// client_handshake in its two halves, for a data stream that connects while the control
// connection's handshake still runs (connect.cpp): the receiver's hello is read as soon as it
// comes, ours is sent only once the control connection is authenticated (the receiver admits
// a data stream only into a transfer its control connection has started).
wire::ServerHello read_server_hello(int fd, const std::string& peer);
HelloResult answer_server_hello(int fd, const std::string& token, wire::ClientHello hello, const wire::ServerHello& server,
                                const std::string& peer, const std::function<void()>& sent = {});

// Certificate mode, on the control connection's plain fd once its TLS handshake has ended:
// waits at most wait_ms for the receiver's CERTIFICATE_ACCEPTED. In TLS 1.3 a receiver judges
// the sender's certificate after the sender's handshake has ended, so without this wait the
// data streams raced its refusal. A refusal arrives as a TLS alert, which the control
// connection's relay reports (relay_error) before it ends the plain fd: that reason is thrown,
// not the end of file it causes.
void await_certificate_verdict(int fd, int wait_ms, const std::string& peer,
                               const std::function<std::optional<Error>()>& relay_error);

} // namespace sluice
