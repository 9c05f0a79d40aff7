// A get session on a session thread (docs/protocol.md, "Get sessions"): the get ring read its
// GET_REQUEST (ring_request.hpp) and found it is not one the ring sends (a tree,
// --connect-back, --get-rate-limit, ...). Here: the checks again (judge.hpp), GET_REPLY, the
// transfer to the client's receiver by the public send() (1 + N threads, as `sluice send`),
// GET_DONE. The reply has the request deadline; the transfer has send()'s own deadlines.
// In certificate mode (the client began TLS: Asked::tls) the thread first runs the handshake
// with the port's certificate and reads GET_REQUEST through the records.
#include <fcntl.h>
#include <sys/socket.h>

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/tls/relay.hpp"
#include "core/wire/codec_get.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/session_threads.hpp"

namespace sluice::serve {

namespace {

uint32_t done_status(ErrorCode c) { return 1 + static_cast<uint32_t>(c); }

// After a refusal: our reply is sent, but the client may have sent more than we read (an
// HTTP request on the wrong port). Closing with unread bytes makes the kernel send a reset,
// which can destroy the reply before the client reads it; so end our side, read what
// arrives (at most 64 KiB, at most a second) and close then.
void linger_close(int fd) {
    ::shutdown(fd, SHUT_WR);
    unsigned char sink[4096];
    for (int i = 0; i < 16 && wait_readable_for(fd, 1000 / 16); ++i) {
        ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n <= 0) break;
    }
}

struct Counted {
    Shared& sh;
    bool ok = false;
    explicit Counted(Shared& s) : sh(s) {}
    ~Counted() {
        if (!ok) sh.get_failed.fetch_add(1);
    }
};

void session(Shared& sh, Attachments& att, Asked& a, const std::atomic<bool>& cancel) {
    const int fd = a.fd.get();
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); // the ring's sockets are non-blocking; this thread waits
    set_io_timeout(fd, rtt_scaled_ms(sh.opt.request_timeout_ms, a.rtt_us));
    Counted counted(sh);
    struct Linger {
        int fd;
        Counted& c;
        ~Linger() {
            if (!c.ok) linger_close(fd);
        }
    } linger{fd, counted};
    const wire::GetRequest& q = a.q;
    Judged j = judge(sh, att, a, false);
    send_all(fd, encode_reply(j.reply), "GET_REPLY");
    if (j.reply.status != wire::GetStatus::ok) return;
    const std::string& host = a.host;
    sh.get_thread.fetch_add(1);
    if (sh.opt.verbose && sh.opt.log) sh.opt.log("get '" + q.path + "' by " + host + ": sent by a session thread: " + a.why_thread);

    SendOptions so;
    so.streams = q.streams;
    so.rate_limit = sh.opt.get_rate_limit;
    // The client's receiver said what it does (GET_REQUEST bits 0 and 1); a client from before
    // decides by address, as automatic does here.
    so.encrypt = q.features & wire::kGetEncrypted ? Encrypt::on : q.features & wire::kGetClear ? Encrypt::off : Encrypt::automatic;
    so.idle_timeout_ms = sh.opt.send_timeout_ms;
    so.cancel = &cancel;
    if (j.slot) {
        Attachments::Slot* sl = j.slot.get();
        const int wait_ms = rtt_scaled_ms(so.connect_timeout_ms, a.rtt_us);
        so.connection = [sl, wait_ms, &cancel] { return sl->take(wait_ms, cancel); };
        so.retry_for_ms = 0; // a broken stream cannot be reopened: the client would have to connect again
    }
    so.verbose = sh.opt.verbose;
    so.log = sh.opt.log;
    wire::GetDone done;
    sh.get_open.fetch_add(1);
    try {
        // Connecting out, the client listens nowhere (reply_port 0): the send's messages name
        // it by its request connection's address, never as "host:0".
        Stats st = send(j.src.list, Endpoint{host, q.reply_port ? q.reply_port : a.peer_port, j.transfer_token}, so);
        sh.get_bytes.fetch_add(st.bytes_sent);
        counted.ok = true;
    } catch (const Error& e) {
        done.status = done_status(e.code());
        done.message = e.what();
    }
    sh.get_open.fetch_sub(1);
    if (sh.opt.verbose && sh.opt.log)
        sh.opt.log("get '" + q.path + "' by " + host + ": " + (done.status ? done.message : std::string("sent")));
    wire::Bytes out;
    encode_get_done(out, done);
    set_io_timeout(fd, rtt_scaled_ms(sh.opt.send_timeout_ms, a.rtt_us));
    send_all(fd, out, "GET_DONE");
}

// Certificate mode: the TLS 1.3 handshake with the port's certificate (the client verifies it;
// with --ca/--pin this side verifies the client's), then the request connection is a relay's
// plain end (core/tls/relay.hpp): GET_REQUEST is read here through the records, as the ring
// reads it in clear (header, then at most kMaxGetPayload), and session() runs as for any
// request, its reply and GET_DONE sealed by the relay. The receiver_token the request carries
// travels only inside this authenticated session, so the transfer's PSK handshakes (keyed by
// it) admit only a receiver that this client started.
void tls_session(Shared& sh, Attachments& att, Asked& a, const std::atomic<bool>& cancel) {
    const int tcp = a.fd.get();
    const int fl = ::fcntl(tcp, F_GETFL);
    if (fl >= 0) ::fcntl(tcp, F_SETFL, fl & ~O_NONBLOCK);
    const int deadline_ms = rtt_scaled_ms(sh.opt.request_timeout_ms, a.rtt_us);
    set_io_timeout(tcp, deadline_ms);
    const PeerAddress p = peer_address(tcp);
    a.host = p.host;
    a.peer_port = p.port;
    const std::string who = "the client " + (p.host.empty() ? std::string("(address unknown)") : p.host);
    bool counted = false; // once session() runs, it counts the outcome
    try {
        tls::CertOutcome r;
        try {
            r = sh.get_certs->handshake(tcp, "", who + " (get request connection)");
        } catch (const Error&) {
            sh.get_certificate_failed.fetch_add(1);
            throw;
        }
        a.client_spki = r.peer_spki;
        tls::Relay relay(std::move(a.fd), r.keys, "the get request connection", nullptr);
        a.fd = relay.take_plain();
        struct ClosePlain { // before the relay ends: it sends what was written, then closes
            Asked& a;
            ~ClosePlain() { a.fd.reset(); }
        } close_plain{a};
        set_io_timeout(a.fd.get(), deadline_ms);
        a.frame.resize(wire::kFrameHeaderBytes);
        recv_exact(a.fd.get(), a.frame, "GET_REQUEST");
        uint8_t type = wire::kGetRequest;
        const uint32_t len = wire::decode_get_first_header(wire::Span(a.frame), &type);
        if (type != wire::kGetRequest)
            throw Error(ErrorCode::protocol, who + " sent GET_ATTACH on a certificate-mode request connection");
        a.frame.resize(wire::kFrameHeaderBytes + len);
        recv_exact(a.fd.get(), std::span(a.frame).subspan(wire::kFrameHeaderBytes), "GET_REQUEST");
        a.q = wire::decode_get_request(wire::Span(a.frame).subspan(wire::kFrameHeaderBytes));
        if (sh.opt.verbose && sh.opt.log)
            sh.opt.log("get request from " + a.host + " in certificate mode" +
                       (a.client_spki.empty() ? std::string() : ", client key " + a.client_spki));
        counted = true;
        session(sh, att, a, cancel);
    } catch (const Error&) {
        if (!counted) sh.get_failed.fetch_add(1);
        throw;
    }
}

} // namespace

void serve_get_session(Shared& sh, Attachments& att, Asked a, const std::atomic<bool>& cancel) {
    try {
        if (a.tls)
            tls_session(sh, att, a, cancel);
        else
            session(sh, att, a, cancel);
    } catch (const Error& e) {
        // The client went away before the transfer, or the server could not open what it asked.
        if (sh.opt.verbose && sh.opt.log) sh.opt.log(std::string("get session: ") + e.what());
    }
}

} // namespace sluice::serve
