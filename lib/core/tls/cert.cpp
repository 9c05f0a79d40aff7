#include "core/tls/cert.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/tls/crl.hpp"
#include "core/tls/openssl_text.hpp"
#include "core/tls/ssl_run.hpp"
#include "sluice/error.hpp"

namespace sluice::tls {

namespace {

constexpr std::string_view kExporterLabel = "EXPORTER-sluice-data-streams";

// Names the option and file: the error a user sees before any connection is made.
void check_readable(const char* option, const std::string& file) {
    FILE* f = std::fopen(file.c_str(), "rb");
    if (!f) throw Error(ErrorCode::usage, std::string(option) + " " + file + ": cannot read it: " + std::strerror(errno));
    std::fclose(f);
}

std::string normalized_pin(const std::string& pin) {
    std::string p = pin;
    std::transform(p.begin(), p.end(), p.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const bool ok = p.size() == 7 + 64 && p.starts_with("sha256:") &&
                    std::all_of(p.begin() + 7, p.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    if (!ok)
        throw Error(ErrorCode::usage, "--pin '" + pin + "': expected sha256: and 64 hex digits, the SHA-256 of the peer's "
                                      "public key (SubjectPublicKeyInfo, DER)");
    return p;
}

// Called by OpenSSL for each certificate of the peer's chain, root first, leaf (depth 0) last.
int verify_peer(int ok, X509_STORE_CTX* x) {
    auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx()));
    Call* c = call_of(ssl);
    X509* cert = X509_STORE_CTX_get_current_cert(x);
    if (!ok && c->chain_judged) {
        const int error = X509_STORE_CTX_get_error(x);
        if (!c->refused.empty()) return 0; // the first reason is the one said
        if (error == X509_V_ERR_CERT_REVOKED && cert)
            c->refused = revoked_text(cert, c->crl_file);
        else
            c->refused = "its certificate (" + name_text(cert ? X509_get_subject_name(cert) : nullptr) +
                         ") did not verify against --ca " + c->ca_file +
                         (is_revocation_error(error) ? " and --crl " + c->crl_file : std::string()) + ": " +
                         X509_verify_cert_error_string(error);
        return 0;
    }
    // Pins only: the chain and dates are not judged (a self-signed certificate is the usual
    // case), only the leaf's key below.
    if (X509_STORE_CTX_get_error_depth(x) != 0 || !cert) return 1;
    c->peer_spki = spki_pin(cert);
    if (!c->pins->empty() && std::find(c->pins->begin(), c->pins->end(), c->peer_spki) == c->pins->end()) {
        c->refused = "its certificate's key is " + c->peer_spki + ", which matches no --pin given";
        X509_STORE_CTX_set_error(x, X509_V_ERR_CERT_REJECTED); // sent as bad_certificate
        return 0;
    }
    return 1;
}

// A client that offers the token's PSK is a sender not in certificate mode: refused with
// unknown_psk_identity, which that sender names as the other mode (ssl_run.cpp).
int no_psk(SSL* ssl, int* alert, void*) {
    const unsigned char* ext = nullptr;
    size_t len = 0;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_psk, &ext, &len) != 1) return SSL_CLIENT_HELLO_SUCCESS;
    call_of(ssl)->refused = "the sender uses the token's key alone (no --ca or --pin) and this receiver is in certificate "
                            "mode (--cert): give the sender --ca FILE or --pin sha256:HEX";
    *alert = SSL_AD_UNKNOWN_PSK_IDENTITY;
    return SSL_CLIENT_HELLO_ERROR;
}

} // namespace

std::string spki_pin(X509* cert) {
    unsigned char* der = nullptr;
    const int len = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);
    if (len <= 0) return "sha256:?";
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(der, static_cast<size_t>(len), md, &mdlen, EVP_sha256(), nullptr);
    OPENSSL_free(der);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "sha256:";
    for (unsigned i = 0; i < mdlen; ++i) {
        out += kHex[md[i] >> 4];
        out += kHex[md[i] & 15];
    }
    return out;
}

namespace {

// OpenSSL calls this when the server asks for a certificate and this side has none set.
int certificate_requested(SSL* ssl, X509**, EVP_PKEY**) {
    call_of(ssl)->certificate_requested = true;
    return 0; // none: the handshake goes on with an empty Certificate, then handshake() refuses
}

} // namespace

std::string load_identity(SSL_CTX* ctx, const std::string& cert_file, const std::string& key_file) {
    check_readable("--cert", cert_file);
    check_readable("--key", key_file);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1)
        throw Error(ErrorCode::usage, "--cert " + cert_file + ": not a PEM certificate (" + openssl_reason() + ")");
    FILE* f = std::fopen(key_file.c_str(), "rb");
    EVP_PKEY* key = f ? PEM_read_PrivateKey(f, nullptr, nullptr, nullptr) : nullptr;
    if (f) std::fclose(f);
    if (!key) throw Error(ErrorCode::usage, "--key " + key_file + ": not a PEM private key (" + openssl_reason() + ")");
    X509* cert = SSL_CTX_get0_certificate(ctx);
    const bool matches = X509_check_private_key(cert, key) == 1;
    ERR_clear_error();
    const bool used = matches && SSL_CTX_use_PrivateKey(ctx, key) == 1;
    EVP_PKEY_free(key);
    if (!matches)
        throw Error(ErrorCode::usage, "--key " + key_file + " is not the private key of --cert " + cert_file +
                                          " (their public keys differ)");
    if (!used) throw Error(ErrorCode::usage, "--key " + key_file + ": " + openssl_reason());
    return spki_pin(cert);
}

CertContext::CertContext(const Certificates& c, Side side) : side_(side), ca_file_(c.ca_file), crl_file_(c.crl_file) {
    const bool client = side == Side::client;
    if (c.cert_file.empty() != c.key_file.empty())
        throw Error(ErrorCode::usage, "--cert and --key go together: give both (the certificate and its private key)");
    if (client && c.ca_file.empty() && c.pins.empty())
        throw Error(ErrorCode::usage, "certificate mode: the sender needs --ca FILE or --pin sha256:HEX to verify the receiver");
    if (!client && c.cert_file.empty())
        throw Error(ErrorCode::usage, "certificate mode: the receiver needs --cert FILE and --key FILE (its identity)");
    for (const std::string& p : c.pins) pins_.push_back(normalized_pin(p));
    // A CRL is checked on a chain verified against a CA: with pins alone no chain is judged.
    if (!c.crl_file.empty() && c.ca_file.empty())
        throw Error(ErrorCode::usage, "--crl " + c.crl_file + ": needs --ca FILE (a CRL is checked on the peer's chain, "
                                      "which only a CA verifies; --pin judges the key alone)");
    for (auto [opt, file] : {std::pair{"--cert", &c.cert_file}, {"--key", &c.key_file}, {"--ca", &c.ca_file},
                             {"--crl", &c.crl_file}})
        if (!file->empty()) check_readable(opt, *file);

    ctx_.reset(new_tls13_ctx(side));
    if (!ctx_) throw Error(ErrorCode::internal, "OpenSSL: cannot set up a TLS 1.3 context");
    if (!c.cert_file.empty()) own_spki_ = load_identity(ctx_.get(), c.cert_file, c.key_file);
    if (!c.ca_file.empty() && SSL_CTX_load_verify_locations(ctx_.get(), c.ca_file.c_str(), nullptr) != 1)
        throw Error(ErrorCode::usage, "--ca " + c.ca_file + ": no PEM certificate in it (" + openssl_reason() + ")");
    if (!c.crl_file.empty()) load_crls(ctx_.get(), c.crl_file, c.ca_file);
    if (client)
        SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, verify_peer);
    else if (!c.ca_file.empty() || !pins_.empty())
        SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_peer);
    if (!client) SSL_CTX_set_client_hello_cb(ctx_.get(), no_psk, nullptr);
    // In TLS 1.3 a client's handshake ends before the server judges its certificate, and the
    // server's refusal comes in a record later, racing the sender's data streams (which then
    // failed first with a bare EOF, or found the receiver gone). A sender without --cert that is
    // asked for one knows the answer already: it fails the handshake with the reason itself.
    if (client && own_spki_.empty()) SSL_CTX_set_client_cert_cb(ctx_.get(), certificate_requested);
}

void CertContext::configure(SSL* ssl, Call& call, const std::string& host) const {
    // A CA vouches for names: the receiver's certificate must name the host the sender
    // dialled (a DNS name or an IP address in its subjectAltName).
    if (side_ == Side::client && !ca_file_.empty()) {
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
            ERR_clear_error();
            SSL_set1_host(ssl, host.c_str());
        }
    }
    call.certificates = true;
    call.pins = &pins_;
    call.chain_judged = !ca_file_.empty();
    call.ca_file = ca_file_;
    call.crl_file = crl_file_;
}

CertOutcome CertContext::finish(SSL* ssl, const Call& call, const LinkKeys& keys, const std::string& peer) const {
    if (call.certificate_requested)
        throw Error(ErrorCode::auth, "TLS handshake with " + peer +
                                         " failed: the peer requires a certificate from this side (it has --ca or --pin): "
                                         "give this side --cert and --key");
    if (SSL_session_reused(ssl))
        throw Error(ErrorCode::protocol, "TLS handshake with " + peer + " resumed a session where a certificate was due");
    CertOutcome out;
    out.keys = keys;
    if (SSL_export_keying_material(ssl, out.session.data(), out.session.size(), kExporterLabel.data(),
                                   kExporterLabel.size(), nullptr, 0, 0) != 1)
        throw Error(ErrorCode::internal, "OpenSSL: no exporter secret after the handshake with " + peer);
    out.peer_spki = call.peer_spki;
    return out;
}

CertOutcome CertContext::handshake(int fd, const std::string& host, const std::string& peer) const {
    std::unique_ptr<SSL, SslFree> ssl(SSL_new(ctx_.get()));
    if (!ssl) throw Error(ErrorCode::internal, "OpenSSL: SSL_new failed");
    Call call;
    configure(ssl.get(), call, host);
    const LinkKeys keys = run_handshake(ssl.get(), fd, side_, call, peer);
    return finish(ssl.get(), call, keys, peer);
}

std::unique_ptr<SteppedHandshake> CertContext::stepped(int fd, const std::string& host, std::string peer) const {
    auto st = std::make_unique<SteppedHandshake::State>();
    st->ssl.reset(SSL_new(ctx_.get()));
    if (!st->ssl) throw Error(ErrorCode::internal, "OpenSSL: SSL_new failed");
    configure(st->ssl.get(), st->call, host);
    st->side = side_;
    st->peer = std::move(peer);
    SSL_set_app_data(st->ssl.get(), &st->call);
    if (!SSL_set_fd(st->ssl.get(), fd)) throw Error(ErrorCode::internal, "OpenSSL: SSL_set_fd failed");
    return std::unique_ptr<SteppedHandshake>(new SteppedHandshake(std::move(st)));
}

CertOutcome CertContext::outcome(SteppedHandshake& h) const {
    SteppedHandshake::State& st = *h.st_;
    const LinkKeys keys = handshake_keys(st.ssl.get(), st.side, st.call, st.peer);
    return finish(st.ssl.get(), st.call, keys, st.peer);
}

} // namespace sluice::tls
