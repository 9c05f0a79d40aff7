// HTTPS on a ring thread (serve --cert/--key; docs/design.md, "HTTPS"): the bytes a
// connection's recv brought are the handshake's until it ends (fed to OpenSSL's memory BIO,
// its flight sent with non-blocking sends, a full socket parked on POLLOUT), then records,
// opened in place by the record engine, whose content takes the plain path (take_input). A
// handshake that fails (a bad ClientHello, plain HTTP, a client refusing the certificate) and
// a record that does not open close the connection and are counted; the deadline the
// connection got when accepted bounds its handshake.
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "serve/engine/worker.hpp"

namespace sluice::serve {

namespace {

// What a client that spoke plain HTTP to the HTTPS port reads (curl prints it): a clear
// answer instead of a reset, as nginx gives. Sent once, best effort, before the close.
constexpr std::string_view kPlainHttp =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 47\r\nConnection: close\r\n\r\n"
    "this port speaks HTTPS: use an https:// URL\r\n\r\n";

} // namespace

void Worker::tls_received(Conn& k, const unsigned char* data, size_t len) {
    TlsConn& t = *k.tls;
    if (!data) { // the recv wrote into rx
        t.rx_len += static_cast<uint32_t>(len);
        if (!t.shake) return tls_records(k);
        data = t.rx; // handed to the handshake below, then rx is empty again
        t.rx_len = 0;
    }
    while (len > 0 && k.phase != Phase::closing && k.in_use) {
        if (t.shake) {
            if (!t.shake->feed(data, len)) {
                cnt_.add(cnt_.tls_failed);
                return close_conn(k);
            }
            len = 0;
            tls_shake(k);
            continue;
        }
        const size_t take = std::min(len, sizeof t.rx - t.rx_len);
        std::memcpy(t.rx + t.rx_len, data, take);
        t.rx_len += static_cast<uint32_t>(take);
        data += take;
        len -= take;
        tls_records(k);
    }
}

void Worker::tls_shake(Conn& k) {
    TlsConn& t = *k.tls;
    const tls::WebHandshake::Step s = t.shake->step();
    // OpenSSL's flight, or after a failure its alert (the client then says why it ended).
    const unsigned char* p = nullptr;
    for (size_t n; (n = t.shake->pending(&p)) > 0;) {
        const ssize_t w = ::send(k.fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (s == tls::WebHandshake::Step::more && (errno == EAGAIN || w == 0)) return k.poll_c.busy() ? void() : park(k); // the rest on POLLOUT
            break;
        }
        count_sent(k, static_cast<uint64_t>(w));
        t.shake->sent(static_cast<size_t>(w));
    }
    if (s == tls::WebHandshake::Step::failed) {
        cnt_.add(cnt_.tls_failed);
        if (t.shake->plain_http()) {
            cnt_.add(cnt_.tls_plain_http);
            (void)::send(k.fd, kPlainHttp.data(), kPlainHttp.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        if (sh_.opt.verbose && sh_.opt.log) sh_.opt.log("HTTPS handshake refused: " + t.shake->why());
        return close_conn(k);
    }
    if (s == tls::WebHandshake::Step::more) return;
    // Done. The client's Finished came after the server's whole flight reached it: nothing of
    // OpenSSL's is left to send, and the records from here are counted from 0 by ours.
    size_t rest = 0;
    try {
        const tls::LinkKeys keys = t.shake->keys();
        if (!t.shake->take_rest(t.rx, sizeof t.rx, &rest) || t.shake->pending(&p) > 0)
            throw Error(ErrorCode::protocol, "more input after the handshake than a record");
        t.sealer = std::make_unique<tls::Sealer>(keys.tx);
        t.opener = std::make_unique<tls::Opener>(keys.rx, "an HTTPS connection");
    } catch (const Error& e) {
        cnt_.add(cnt_.tls_failed);
        if (sh_.opt.verbose && sh_.opt.log) sh_.opt.log(std::string("HTTPS handshake refused: ") + e.what());
        return close_conn(k);
    }
    t.shake.reset();
    t.rx_len = static_cast<uint32_t>(rest);
    cnt_.add(cnt_.tls_handshakes);
    tls_records(k);
}

void Worker::tls_records(Conn& k) {
    TlsConn& t = *k.tls;
    size_t at = 0;
    try {
        while (t.rx_len - at >= tls::kHeaderBytes) {
            const size_t n = t.opener->record_size(t.rx + at);
            if (t.rx_len - at < n) break;
            const size_t got = t.opener->open(t.rx + at, n);
            const char* plain = reinterpret_cast<const char*>(t.rx + at + tls::kHeaderBytes);
            at += n;
            // More pipelined input than a client may queue: hostile or broken, as in clear.
            if (!take_input(k, plain, got)) return close_conn(k);
            if (!k.in_use || k.phase == Phase::closing) return;
        }
    } catch (const Error& e) {
        return tls_bad_record(k, e);
    }
    std::memmove(t.rx, t.rx + at, t.rx_len - at);
    t.rx_len -= static_cast<uint32_t>(at);
}

void Worker::tls_bad_record(Conn& k, const Error& e) {
    // An alert (close_notify, or any other) is the client leaving; anything else is a record
    // that failed its tag or TLS's limits: counted, and the connection closed either way.
    if (e.cause() != ErrorCause::peer_closed) {
        cnt_.add(cnt_.tls_bad_records);
        if (sh_.opt.verbose && sh_.opt.log) sh_.opt.log(std::string("HTTPS connection closed: ") + e.what());
    }
    close_conn(k);
}

} // namespace sluice::serve
