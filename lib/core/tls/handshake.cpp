#include "core/tls/handshake.hpp"

#include <openssl/ssl.h>

#include <cstring>
#include <memory>
#include <mutex>

#include "core/tls/ssl_run.hpp"
#include "sluice/error.hpp"

namespace sluice::tls {

namespace {

constexpr unsigned char kAes128GcmSha256[] = {0x13, 0x01};
constexpr std::string_view kIdentity = "sluice";

SSL_SESSION* psk_session(SSL* ssl, const Psk& psk) {
    const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes128GcmSha256);
    if (!cipher) return nullptr;
    SSL_SESSION* s = SSL_SESSION_new();
    if (!s) return nullptr;
    if (!SSL_SESSION_set1_master_key(s, psk.data(), psk.size()) || !SSL_SESSION_set_cipher(s, cipher) ||
        !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
        SSL_SESSION_free(s);
        return nullptr;
    }
    return s;
}

int use_session(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* idlen, SSL_SESSION** sess) {
    *sess = nullptr;
    const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes128GcmSha256);
    if (!cipher || (md && SSL_CIPHER_get_handshake_digest(cipher) != md)) return 1;
    *sess = psk_session(ssl, *call_of(ssl)->psk);
    *id = reinterpret_cast<const unsigned char*>(kIdentity.data());
    *idlen = kIdentity.size();
    return *sess ? 1 : 0;
}

int find_session(SSL* ssl, const unsigned char* id, size_t idlen, SSL_SESSION** sess) {
    *sess = nullptr;
    if (idlen != kIdentity.size() || std::memcmp(id, kIdentity.data(), idlen) != 0) return 1; // not ours: no PSK
    *sess = psk_session(ssl, *call_of(ssl)->psk);
    return *sess ? 1 : 0;
}

// A client that offers no PSK is a sender in certificate mode (cert.cpp): refused with
// access_denied, which that sender names as the other mode (ssl_run.cpp), instead of the
// certificate-less handshake failing somewhere later with a vaguer alert.
int psk_required(SSL* ssl, int* alert, void*) {
    const unsigned char* ext = nullptr;
    size_t len = 0;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_psk, &ext, &len) == 1) return SSL_CLIENT_HELLO_SUCCESS;
    call_of(ssl)->refused = "the sender is in certificate mode (--ca or --pin) and this receiver is not (no --cert): give "
                            "both sides the same mode";
    // access_denied, not missing_extension: before the version is agreed OpenSSL sends only
    // the alerts TLS 1.2 has, and would turn missing_extension into handshake_failure, which
    // the sender would read as a wrong token.
    *alert = SSL_AD_ACCESS_DENIED;
    return SSL_CLIENT_HELLO_ERROR;
}

SSL_CTX* make_ctx(Side side) {
    SSL_CTX* ctx = new_tls13_ctx(side);
    if (!ctx) return nullptr;
    if (side == Side::client) {
        SSL_CTX_set_psk_use_session_callback(ctx, use_session);
    } else {
        SSL_CTX_set_psk_find_session_callback(ctx, find_session);
        SSL_CTX_set_client_hello_cb(ctx, psk_required, nullptr);
    }
    return ctx;
}

SSL_CTX* shared_ctx(Side side) {
    static std::once_flag once;
    static SSL_CTX* ctx[2] = {};
    std::call_once(once, [] {
        ctx[0] = make_ctx(Side::client);
        ctx[1] = make_ctx(Side::server);
    });
    SSL_CTX* c = ctx[side == Side::client ? 0 : 1];
    if (!c) throw Error(ErrorCode::internal, "OpenSSL: cannot set up a TLS 1.3 context");
    return c;
}

} // namespace

LinkKeys handshake(int fd, Side side, const Psk& psk, const std::string& peer) {
    std::unique_ptr<SSL, SslFree> ssl(SSL_new(shared_ctx(side)));
    if (!ssl) throw Error(ErrorCode::internal, "OpenSSL: SSL_new failed");
    Call call;
    call.psk = &psk;
    LinkKeys keys = run_handshake(ssl.get(), fd, side, call, peer);
    if (!SSL_session_reused(ssl.get()))
        throw Error(ErrorCode::protocol, "TLS handshake with " + peer + " ended without the pre-shared key");
    return keys;
}

SteppedHandshake::SteppedHandshake(int fd, Side side, const Psk& psk, std::string peer) : st_(std::make_unique<State>()) {
    st_->ssl.reset(SSL_new(shared_ctx(side)));
    if (!st_->ssl) throw Error(ErrorCode::internal, "OpenSSL: SSL_new failed");
    st_->psk = psk;
    st_->call.psk = &st_->psk;
    st_->side = side;
    st_->peer = std::move(peer);
    SSL_set_app_data(st_->ssl.get(), &st_->call);
    if (!SSL_set_fd(st_->ssl.get(), fd)) throw Error(ErrorCode::internal, "OpenSSL: SSL_set_fd failed");
}

SteppedHandshake::SteppedHandshake(std::unique_ptr<State> st) : st_(std::move(st)) {}

SteppedHandshake::~SteppedHandshake() = default;

SteppedHandshake::Want SteppedHandshake::step() {
    const int r = step_handshake(st_->ssl.get(), st_->side, st_->call, st_->peer);
    return r == 1 ? Want::done : r == SSL_ERROR_WANT_READ ? Want::read : Want::write;
}

LinkKeys SteppedHandshake::keys() {
    if (st_->call.certificates)
        throw Error(ErrorCode::internal, "TLS handshake with " + st_->peer + ": a certificate handshake's outcome is CertContext's");
    if (!SSL_session_reused(st_->ssl.get()))
        throw Error(ErrorCode::protocol, "TLS handshake with " + st_->peer + " ended without the pre-shared key");
    return handshake_keys(st_->ssl.get(), st_->side, st_->call, st_->peer);
}

} // namespace sluice::tls
