#pragma once
// The TLS 1.3 handshake of one connection, run by OpenSSL over the connection's blocking
// socket right after the sluice hello (docs/protocol.md, "Encryption"). Keyed by an external
// PSK (keys.hpp): no certificates. Every connection also runs (EC)DHE (X25519), so a token
// that leaks later does not open recorded traffic; the PSK makes it a resumption-style
// handshake (no certificate, no signature): one round trip and ~0.1 ms of CPU per stream.
// OpenSSL leaves the connection after the handshake; the records that follow are this
// project's own TLS 1.3 record layer (record.hpp) or the kernel's (ktls.hpp), keyed with the
// traffic secrets the handshake produced.
#include <string>

#include "core/tls/keys.hpp"

namespace sluice::tls {

enum class Side { client, server };

// Runs the handshake on fd (blocking; its SO_RCVTIMEO/SO_SNDTIMEO bound it) and returns the
// record keys of both directions. Throws auth when the peer's PSK differs (a wrong token, or
// a sluice hello altered in flight), network when the connection fails or times out,
// protocol for anything else, each naming `peer`.
LinkKeys handshake(int fd, Side side, const Psk& psk, const std::string& peer);

} // namespace sluice::tls
