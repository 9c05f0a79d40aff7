#include "core/tls/web_handshake.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>

#include <algorithm>
#include <cstring>

#include "core/tls/cert.hpp"
#include "core/tls/ssl_run.hpp"
#include "sluice/error.hpp"

namespace sluice::tls {

namespace {

constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// http/1.1 when the client offers it; a client offering only other protocols (h2 alone) gets
// no ALPN answer and may go on with HTTP/1.1 or leave: the server never claims what it lacks.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen, void*) {
    unsigned char* chosen = nullptr;
    if (SSL_select_next_proto(&chosen, outlen, kHttp11, sizeof kHttp11, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

} // namespace

WebContext::WebContext(const std::string& cert_file, const std::string& key_file) {
    if (cert_file.empty() != key_file.empty())
        throw Error(ErrorCode::usage, "--cert and --key go together: give both (the certificate and its private key)");
    ctx_.reset(new_tls13_ctx(Side::server));
    if (!ctx_) throw Error(ErrorCode::internal, "OpenSSL: cannot set up a TLS 1.3 context");
    // Web clients' key shares: X25519 first (all of those named above send it), the NIST
    // curves for the rest, so none needs a HelloRetryRequest round trip it could avoid.
    SSL_CTX_set1_groups_list(ctx_.get(), "X25519:P-256:P-384");
    SSL_CTX_set_alpn_select_cb(ctx_.get(), select_alpn, nullptr);
    spki_ = load_identity(ctx_.get(), cert_file, key_file);
}

struct WebHandshake::State {
    std::unique_ptr<SSL, SslFree> ssl;
    BIO* in = nullptr;  // owned by ssl
    BIO* out = nullptr; // owned by ssl
    Call call;          // SSL app data (the key log's secrets): State is never moved
};

WebHandshake::WebHandshake(const WebContext& ctx) : st_(std::make_unique<State>()) {
    st_->ssl.reset(SSL_new(ctx.get()));
    st_->in = BIO_new(BIO_s_mem());
    st_->out = BIO_new(BIO_s_mem());
    if (!st_->ssl || !st_->in || !st_->out) {
        BIO_free(st_->in);
        BIO_free(st_->out);
        throw Error(ErrorCode::internal, "OpenSSL: cannot set up a TLS connection");
    }
    BIO_set_mem_eof_return(st_->in, -1); // an empty input is "want read", not the end
    SSL_set_bio(st_->ssl.get(), st_->in, st_->out);
    SSL_set_app_data(st_->ssl.get(), &st_->call);
    SSL_set_accept_state(st_->ssl.get());
}

WebHandshake::~WebHandshake() = default;

bool WebHandshake::feed(const unsigned char* p, size_t n) {
    if (BIO_ctrl_pending(st_->in) + n > kMaxIn) {
        why_ = "more than " + std::to_string(kMaxIn) + " bytes before the handshake ended";
        return false;
    }
    return n == 0 || BIO_write(st_->in, p, static_cast<int>(n)) == static_cast<int>(n);
}

WebHandshake::Step WebHandshake::step() {
    ERR_clear_error();
    const int rc = SSL_do_handshake(st_->ssl.get());
    if (rc == 1) return Step::done;
    const int err = SSL_get_error(st_->ssl.get(), rc);
    if (err == SSL_ERROR_WANT_READ) return Step::more;
    const unsigned long e = ERR_peek_last_error();
    plain_http_ = ERR_GET_REASON(e) == SSL_R_HTTP_REQUEST;
    char text[256] = {};
    ERR_error_string_n(e, text, sizeof text);
    ERR_clear_error();
    why_ = plain_http_ ? "plain HTTP sent to the HTTPS port" : e ? text : "the handshake failed";
    return Step::failed;
}

size_t WebHandshake::pending(const unsigned char** p) const {
    char* data = nullptr;
    const long n = BIO_get_mem_data(st_->out, &data);
    *p = reinterpret_cast<const unsigned char*>(data);
    return n > 0 ? static_cast<size_t>(n) : 0;
}

void WebHandshake::sent(size_t n) {
    unsigned char sink[1024];
    while (n > 0) {
        const int r = BIO_read(st_->out, sink, static_cast<int>(std::min(n, sizeof sink)));
        if (r <= 0) return;
        n -= static_cast<size_t>(r);
    }
}

LinkKeys WebHandshake::keys() { return handshake_keys(st_->ssl.get(), Side::server, st_->call, "the HTTPS client"); }

bool WebHandshake::take_rest(unsigned char* dst, size_t cap, size_t* len) {
    const size_t n = BIO_ctrl_pending(st_->in);
    *len = 0;
    if (n > cap) return false;
    if (n > 0 && BIO_read(st_->in, dst, static_cast<int>(n)) != static_cast<int>(n)) return false;
    *len = n;
    return true;
}

} // namespace sluice::tls
