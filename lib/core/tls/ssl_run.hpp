#pragma once
// What the PSK handshake (handshake.cpp) and the certificate handshake (cert.cpp) share: the
// TLS 1.3 context settings both need, the state their OpenSSL callbacks fill in, and the
// loop that runs a handshake on a blocking socket and maps its failure to an Error.
#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/tls/handshake.hpp"

namespace sluice::tls {

// What the callbacks of one SSL read and write (SSL app data).
struct Call {
    const Psk* psk = nullptr;
    Secret client_secret{};
    Secret server_secret{};
    bool have_client = false;
    bool have_server = false;
    // Certificate mode: what the peer's certificate must match (cert.cpp's verify callback).
    bool certificates = false; // the certificate handshake (no PSK: a failure is not a wrong token)
    const std::vector<std::string>* pins = nullptr;
    bool chain_judged = false; // a CA was given: the chain and dates count (else only a pin)
    std::string ca_file;
    std::string crl_file;      // --crl: a revoked certificate is refused naming it
    std::string peer_spki;     // "sha256:HEX" of the peer's leaf certificate's key, once seen
    // Why this side refused the handshake, said by a callback (a pin that matched none, a
    // certificate that did not verify, the other side in another mode); first in the error.
    std::string refused;
    // The peer (a receiver with --ca or --pin) asked for this side's certificate and this side
    // has none: known at once from its CertificateRequest, before the peer's verdict.
    bool certificate_requested = false;
};

Call* call_of(const SSL* ssl);

struct SslFree {
    void operator()(SSL* s) const { SSL_free(s); }
};

// A SteppedHandshake's state: the PSK one's (handshake.cpp) or the certificate one's (cert.cpp).
struct SteppedHandshake::State {
    std::unique_ptr<SSL, SslFree> ssl;
    Psk psk{};
    Call call; // SSL app data: its address stays (State is never moved)
    Side side = Side::client;
    std::string peer;
};

// A TLS 1.3-only context: one cipher suite (TLS_AES_128_GCM_SHA256), X25519, no tickets, no
// middlebox compatibility records, no read-ahead, the key log that hands over the traffic
// secrets. nullptr when OpenSSL fails.
SSL_CTX* new_tls13_ctx(Side side);

// Runs the handshake of ssl (app data: call) on fd until it ends, then returns the record
// keys of both directions. Throws as handshake() says, each naming peer.
LinkKeys run_handshake(SSL* ssl, int fd, Side side, Call& call, const std::string& peer);

// One step of the same handshake on a non-blocking socket (ssl's fd and app data set): 1 when
// it has ended, SSL_ERROR_WANT_READ or SSL_ERROR_WANT_WRITE when it waits for the socket.
// Throws as handshake() does.
int step_handshake(SSL* ssl, Side side, Call& call, const std::string& peer);
// Once the handshake has ended: the record keys of both directions (nothing may be buffered).
LinkKeys handshake_keys(SSL* ssl, Side side, Call& call, const std::string& peer);

} // namespace sluice::tls
