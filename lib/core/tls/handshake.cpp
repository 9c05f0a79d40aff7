#include "core/tls/handshake.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "sluice/error.hpp"

namespace sluice::tls {

namespace {

constexpr unsigned char kAes128GcmSha256[] = {0x13, 0x01};
constexpr std::string_view kIdentity = "sluice";

// What the callbacks of one SSL read and write (SSL app data).
struct Call {
    const Psk* psk = nullptr;
    Secret client_secret{};
    Secret server_secret{};
    bool have_client = false;
    bool have_server = false;
};

Call* call_of(const SSL* ssl) { return static_cast<Call*>(SSL_get_app_data(ssl)); }

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

bool unhex(std::string_view hex, Secret& out) {
    if (hex.size() != 2 * out.size()) return false;
    auto v = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    for (size_t i = 0; i < out.size(); ++i) {
        int hi = v(hex[2 * i]), lo = v(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = static_cast<unsigned char>(hi << 4 | lo);
    }
    return true;
}

// OpenSSL 3.0 has no call that returns the application traffic secrets; its key log (the
// NSS format, one line per secret) is the supported way to see them. Only the two secrets
// of the application data are kept; the line is never written anywhere.
void key_log(const SSL* ssl, const char* line) {
    std::string_view l(line);
    Call* c = call_of(ssl);
    auto take = [&](std::string_view label, Secret& s, bool& have) {
        if (!l.starts_with(label)) return;
        auto last = l.rfind(' ');
        if (last != std::string_view::npos) have = unhex(l.substr(last + 1), s);
    };
    take("CLIENT_TRAFFIC_SECRET_0 ", c->client_secret, c->have_client);
    take("SERVER_TRAFFIC_SECRET_0 ", c->server_secret, c->have_server);
}

SSL_CTX* make_ctx(Side side) {
    SSL_CTX* ctx = SSL_CTX_new(side == Side::client ? TLS_client_method() : TLS_server_method());
    if (!ctx) return nullptr;
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
    SSL_CTX_set1_groups_list(ctx, "X25519");
    // No tickets (the PSK is external), no middlebox compatibility records: after the
    // handshake nothing of OpenSSL's may be on the wire or in its buffers, because the records
    // that follow are counted from sequence 0 by another record layer.
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_clear_options(ctx, SSL_OP_ENABLE_MIDDLEBOX_COMPAT);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_read_ahead(ctx, 0);
    SSL_CTX_set_keylog_callback(ctx, key_log);
    if (side == Side::client)
        SSL_CTX_set_psk_use_session_callback(ctx, use_session);
    else
        SSL_CTX_set_psk_find_session_callback(ctx, find_session);
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

struct SslFree {
    void operator()(SSL* s) const { SSL_free(s); }
};

[[noreturn]] void fail(SSL* ssl, int rc, int saved_errno, const std::string& peer) {
    const int err = SSL_get_error(ssl, rc);
    unsigned long e = ERR_peek_last_error();
    int reason = ERR_GET_REASON(e);
    char text[256] = {};
    ERR_error_string_n(e, text, sizeof text);
    ERR_clear_error();
    const std::string head = "TLS handshake with " + peer + " failed: ";
    // The server finds the client's PSK binder wrong; the client hears the server's alert.
    if (reason == SSL_R_BINDER_DOES_NOT_VERIFY || reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR ||
        reason == SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER ||
        reason == SSL_R_NO_SHARED_CIPHER || reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
        reason == SSL_R_TLSV1_ALERT_INTERNAL_ERROR)
        throw Error(ErrorCode::auth, head + "the peer's key does not match ours (a different token, or a sluice hello "
                                             "altered in flight)");
    if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)
            throw Error(ErrorCode::network, head + "timed out", ErrorCause::timed_out);
        if (e == 0 && saved_errno == 0) throw Error(ErrorCode::network, head + "the peer closed the connection", ErrorCause::peer_closed);
        throw Error(ErrorCode::network, head + std::strerror(saved_errno), ErrorCause::peer_reset);
    }
    if (err == SSL_ERROR_ZERO_RETURN) throw Error(ErrorCode::network, head + "the peer closed the connection", ErrorCause::peer_closed);
    throw Error(ErrorCode::protocol, head + (e ? text : "unknown OpenSSL error"));
}

} // namespace

LinkKeys handshake(int fd, Side side, const Psk& psk, const std::string& peer) {
    std::unique_ptr<SSL, SslFree> ssl(SSL_new(shared_ctx(side)));
    if (!ssl) throw Error(ErrorCode::internal, "OpenSSL: SSL_new failed");
    Call call{.psk = &psk};
    SSL_set_app_data(ssl.get(), &call);
    if (!SSL_set_fd(ssl.get(), fd)) throw Error(ErrorCode::internal, "OpenSSL: SSL_set_fd failed");
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int rc = side == Side::client ? SSL_connect(ssl.get()) : SSL_accept(ssl.get());
        if (rc == 1) break;
        const int saved = errno;
        // A signal (SO_RCVTIMEO sockets return EINTR even under SA_RESTART) is not a failure:
        // OpenSSL reports it as "want read/write" and the handshake resumes where it stopped.
        const int err = SSL_get_error(ssl.get(), rc);
        if ((err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) && saved == EINTR) continue;
        fail(ssl.get(), rc, saved, peer);
    }
    // Without read-ahead OpenSSL reads record by record and the peer sends nothing before it
    // has finished its side: anything buffered here would be lost to the next record layer.
    if (SSL_has_pending(ssl.get()))
        throw Error(ErrorCode::protocol, "TLS handshake with " + peer + ": data arrived before the handshake ended");
    if (!call.have_client || !call.have_server || !SSL_session_reused(ssl.get()))
        throw Error(ErrorCode::protocol, "TLS handshake with " + peer + " ended without the pre-shared key");
    TrafficKey c = traffic_key(call.client_secret);
    TrafficKey s = traffic_key(call.server_secret);
    call.client_secret.fill(0);
    call.server_secret.fill(0);
    // The SSL is freed without close_notify: the connection goes on under the same keys.
    SSL_set_quiet_shutdown(ssl.get(), 1);
    return side == Side::client ? LinkKeys{.tx = c, .rx = s} : LinkKeys{.tx = s, .rx = c};
}

} // namespace sluice::tls
