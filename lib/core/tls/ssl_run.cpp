#include "core/tls/ssl_run.hpp"

#include <openssl/err.h>

#include <cerrno>
#include <cstring>

#include "sluice/error.hpp"

namespace sluice::tls {

namespace {

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

// The alerts and local reasons of a refused handshake, as this side says them. Certificate
// mode adds its own; the rest are the PSK's (a wrong token shows as a binder that does not
// verify on the server and as its alert on the client).
std::string refusal_text(unsigned long e, bool certificates) {
    const int reason = ERR_GET_REASON(e);
    const char* said = ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "?";
    switch (reason) {
    case SSL_R_BINDER_DOES_NOT_VERIFY:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
    case SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER:
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_TLSV1_ALERT_INTERNAL_ERROR:
        if (certificates) return std::string("the peer refused the handshake (") + said + ")";
        return "the peer's key does not match ours (a different token, or a sluice hello altered in flight)";
    case SSL_R_TLSV1_ALERT_UNKNOWN_PSK_IDENTITY:
        return "the peer is in certificate mode (it has --cert) and this side is not (no --ca or --pin): give this "
               "side --ca FILE or --pin sha256:HEX, or start the peer without --cert";
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
        return "the peer is not in certificate mode (no --cert) and this side is (--ca, --pin or --cert): give both "
               "sides the same mode";
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
        return "the peer requires a certificate from this side (it has --ca or --pin): give this side --cert and --key";
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
        return std::string("the peer refused this side's certificate (") + said +
               "): check its --pin or --ca against this side's --cert";
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        return "the peer sent no certificate and this side requires one (--ca or --pin): give the peer --cert and --key";
    default:
        return {};
    }
}

[[noreturn]] void fail(SSL* ssl, const Call& call, int rc, int saved_errno, const std::string& peer) {
    const int err = SSL_get_error(ssl, rc);
    unsigned long e = ERR_peek_last_error();
    char text[256] = {};
    ERR_error_string_n(e, text, sizeof text);
    ERR_clear_error();
    const std::string head = "TLS handshake with " + peer + " failed: ";
    if (!call.refused.empty()) throw Error(ErrorCode::auth, head + call.refused);
    if (std::string why = refusal_text(e, call.certificates); !why.empty()) throw Error(ErrorCode::auth, head + why);
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

Call* call_of(const SSL* ssl) { return static_cast<Call*>(SSL_get_app_data(ssl)); }

SSL_CTX* new_tls13_ctx(Side side) {
    SSL_CTX* ctx = SSL_CTX_new(side == Side::client ? TLS_client_method() : TLS_server_method());
    if (!ctx) return nullptr;
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_ciphersuites(ctx, kCipherSuite);
    SSL_CTX_set1_groups_list(ctx, "X25519");
    // No tickets (the data streams' PSKs come from our own derivation), no middlebox
    // compatibility records: after the handshake nothing of OpenSSL's may be on the wire or in
    // its buffers, because the records that follow are counted from sequence 0 by another
    // record layer.
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_clear_options(ctx, SSL_OP_ENABLE_MIDDLEBOX_COMPAT);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_read_ahead(ctx, 0);
    SSL_CTX_set_keylog_callback(ctx, key_log);
    return ctx;
}

LinkKeys run_handshake(SSL* ssl, int fd, Side side, Call& call, const std::string& peer) {
    SSL_set_app_data(ssl, &call);
    if (!SSL_set_fd(ssl, fd)) throw Error(ErrorCode::internal, "OpenSSL: SSL_set_fd failed");
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int rc = side == Side::client ? SSL_connect(ssl) : SSL_accept(ssl);
        if (rc == 1) break;
        const int saved = errno;
        // A signal (SO_RCVTIMEO sockets return EINTR even under SA_RESTART) is not a failure:
        // OpenSSL reports it as "want read/write" and the handshake resumes where it stopped.
        const int err = SSL_get_error(ssl, rc);
        if ((err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) && saved == EINTR) continue;
        fail(ssl, call, rc, saved, peer);
    }
    return handshake_keys(ssl, side, call, peer);
}

int step_handshake(SSL* ssl, Side side, Call& call, const std::string& peer) {
    ERR_clear_error();
    errno = 0;
    int rc = side == Side::client ? SSL_connect(ssl) : SSL_accept(ssl);
    if (rc == 1) return 1;
    const int saved = errno;
    const int err = SSL_get_error(ssl, rc);
    // On a non-blocking socket, "want" is the socket having nothing (or no room) now.
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return err;
    fail(ssl, call, rc, saved, peer);
}

LinkKeys handshake_keys(SSL* ssl, Side side, Call& call, const std::string& peer) {
    // Without read-ahead OpenSSL reads record by record and the peer sends nothing before it
    // has finished its side: anything buffered here would be lost to the next record layer.
    if (SSL_has_pending(ssl))
        throw Error(ErrorCode::protocol, "TLS handshake with " + peer + ": data arrived before the handshake ended");
    if (!call.have_client || !call.have_server)
        throw Error(ErrorCode::protocol, "TLS handshake with " + peer + " ended without its traffic secrets");
    // The record layer and traffic_key() are AES-128-GCM's: any other suite (the context
    // offers none) would be keyed wrongly, so it is refused here rather than trusted.
    const SSL_CIPHER* suite = SSL_get_current_cipher(ssl);
    if (!suite || SSL_CIPHER_get_id(suite) != TLS1_3_CK_AES_128_GCM_SHA256)
        throw Error(ErrorCode::protocol, "TLS handshake with " + peer + " agreed on " +
                                             (suite ? SSL_CIPHER_get_name(suite) : "no cipher suite") + ", not " + kCipherSuite);
    TrafficKey c = traffic_key(call.client_secret);
    TrafficKey s = traffic_key(call.server_secret);
    call.client_secret.fill(0);
    call.server_secret.fill(0);
    // The SSL is freed without close_notify: the connection goes on under the same keys.
    SSL_set_quiet_shutdown(ssl, 1);
    return side == Side::client ? LinkKeys{.tx = c, .rx = s} : LinkKeys{.tx = s, .rx = c};
}

} // namespace sluice::tls
