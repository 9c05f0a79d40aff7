#pragma once
// The TLS 1.3 handshake of one connection, run by OpenSSL over the connection's blocking
// socket right after the sluice hello (docs/protocol.md, "Encryption"). Keyed by an external
// PSK (keys.hpp): no certificates. Every connection also runs (EC)DHE (X25519), so a token
// that leaks later does not open recorded traffic; the PSK makes it a resumption-style
// handshake (no certificate, no signature): one round trip and ~0.1 ms of CPU per stream.
// OpenSSL leaves the connection after the handshake; the records that follow are this
// project's own TLS 1.3 record layer (record.hpp) or the kernel's (ktls.hpp), keyed with the
// traffic secrets the handshake produced.
#include <memory>
#include <string>

#include "core/tls/keys.hpp"

namespace sluice::tls {

enum class Side { client, server };

// Runs the handshake on fd (blocking; its SO_RCVTIMEO/SO_SNDTIMEO bound it) and returns the
// record keys of both directions. Throws auth when the peer's PSK differs (a wrong token, or
// a sluice hello altered in flight), network when the connection fails or times out,
// protocol for anything else, each naming `peer`.
LinkKeys handshake(int fd, Side side, const Psk& psk, const std::string& peer);

// The same handshake on a non-blocking socket, a step at a time, for an event loop (the get
// ring, lib/serve/get): step() runs it as far as the socket allows and says what it waits
// for; the caller polls fd for that and calls step() again, under its own deadline.
// CertContext::stepped (cert.hpp) makes one that runs the certificate handshake instead, with
// that context's checks; its outcome is CertContext::outcome's, not keys().
class SteppedHandshake {
public:
    enum class Want : uint8_t { done, read, write };
    // Throws internal when OpenSSL cannot set it up.
    SteppedHandshake(int fd, Side side, const Psk& psk, std::string peer);
    ~SteppedHandshake();
    SteppedHandshake(const SteppedHandshake&) = delete;
    SteppedHandshake& operator=(const SteppedHandshake&) = delete;
    // Throws what handshake() throws.
    Want step();
    // Once step() said done: the record keys (throws protocol when the handshake left data behind).
    LinkKeys keys();

    struct State; // ssl_run.hpp

private:
    friend class CertContext;
    explicit SteppedHandshake(std::unique_ptr<State> st);
    std::unique_ptr<State> st_;
};

} // namespace sluice::tls
