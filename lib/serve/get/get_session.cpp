// A get session on a session thread (docs/protocol.md, "Get sessions"): the get ring read its
// GET_REQUEST (ring_request.hpp) and found it is not one the ring sends (a tree,
// --connect-back, --get-rate-limit, ...). Here: the checks again (judge.hpp), GET_REPLY, the
// transfer to the client's receiver by the public send() (1 + N threads, as `sluice send`),
// GET_DONE. The reply has the request deadline; the transfer has send()'s own deadlines.
#include <fcntl.h>
#include <sys/socket.h>

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
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
    Judged j = judge(sh, att, a, false, false);
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
        Stats st = send(j.src.list, Endpoint{host, q.reply_port ? q.reply_port : a.peer_port, q.receiver_token}, so);
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

} // namespace

void serve_get_session(Shared& sh, Attachments& att, Asked a, const std::atomic<bool>& cancel) {
    try {
        session(sh, att, a, cancel);
    } catch (const Error& e) {
        // The client went away before the transfer, or the server could not open what it asked.
        if (sh.opt.verbose && sh.opt.log) sh.opt.log(std::string("get session: ") + e.what());
    }
}

} // namespace sluice::serve
