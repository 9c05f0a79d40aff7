#pragma once
// Certificate mode (docs/protocol.md, "Certificate mode"): the control connection's TLS 1.3
// handshake authenticates with X.509 certificates (ECDHE, a signature, the chain or a pinned
// key checked) instead of the token's PSK. The data streams do not repeat it: each runs the
// PSK handshake of handshake.hpp keyed from this session's exporter secret and the token
// (links.hpp), as cheap as a resumption. The token still authorizes the transfer: the sluice
// hello before the TLS handshake proves it both ways, as without certificates.
#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/tls/handshake.hpp"
#include "sluice/sluice.hpp"

namespace sluice::tls {

struct Call; // ssl_run.hpp

struct CertOutcome {
    LinkKeys keys;
    Secret session{};      // the TLS exporter secret the data streams' PSKs are keyed from
    std::string peer_spki; // "sha256:HEX" of the peer's key, empty when it sent no certificate
};

class CertContext {
public:
    // Loads and checks the files of c for this side (client: the sender). Throws usage naming
    // the option and file: unreadable, not PEM, a key that is not the certificate's, a pin
    // that is not sha256:HEX, a CRL file crl.hpp refuses, or an option this side's mode
    // needs missing (--crl without --ca).
    CertContext(const Certificates& c, Side side);
    CertContext(const CertContext&) = delete;
    CertContext& operator=(const CertContext&) = delete;

    // The full handshake on fd (blocking; its timeouts bound it). host: the name or address
    // the sender connected to, which a CA-verified receiver certificate must name (the server
    // ignores it). Throws auth for a refused certificate or a peer in the other mode, else as
    // handshake() does, naming peer.
    CertOutcome handshake(int fd, const std::string& host, const std::string& peer) const;
    // The same handshake on a non-blocking fd, stepped by an event loop (the get ring: the
    // request connection of `serve --cert --port`), with the same checks; once its step() said
    // done, outcome() gives what handshake() returns (and throws what it throws).
    std::unique_ptr<SteppedHandshake> stepped(int fd, const std::string& host, std::string peer) const;
    CertOutcome outcome(SteppedHandshake& h) const;
    // "sha256:HEX" of this side's certificate's key, the value the peer pins; empty without --cert.
    const std::string& own_spki() const { return own_spki_; }
    // A server that requires the client's certificate (it has --ca or --pin).
    bool verifies_peer() const { return !ca_file_.empty() || !pins_.empty(); }

private:
    void configure(SSL* ssl, Call& call, const std::string& host) const; // the checks of this side
    CertOutcome finish(SSL* ssl, const Call& call, const LinkKeys& keys, const std::string& peer) const;

    struct CtxFree {
        void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
    };
    // Owned from the line that makes it: a check of the files failing later in the constructor
    // throws, and no destructor runs for a half-built object (LeakSanitizer found the whole
    // context leaked by each refused --key or --crl).
    std::unique_ptr<SSL_CTX, CtxFree> ctx_;
    Side side_;
    std::vector<std::string> pins_; // lower-case "sha256:HEX"
    std::string ca_file_;
    std::string crl_file_;
    std::string own_spki_;
};

// Loads --cert (a PEM chain, leaf first) and --key into ctx after checking both can be read
// and that the key is the certificate's; returns the certificate's "sha256:HEX". Throws usage
// naming the option, the file and the reason (the errors send, recv and serve print).
std::string load_identity(SSL_CTX* ctx, const std::string& cert_file, const std::string& key_file);

// "sha256:HEX" (lower case) of cert's SubjectPublicKeyInfo.
std::string spki_pin(X509* cert);

} // namespace sluice::tls
