// One get session (docs/protocol.md, "Get sessions"): GET_HELLO, GET_REQUEST (MAC of the
// server's token over our nonce), GET_REPLY, the transfer to the client's receiver by the
// public send(), GET_DONE. Every read has the request deadline until the transfer starts;
// the transfer has send()'s own deadlines.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <netdb.h>
#include <sys/socket.h>

#include <optional>

#include "core/io/mptcp.hpp"
#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec_get.hpp"
#include "serve/get/attachments.hpp"
#include "serve/get/get_port.hpp"
#include "serve/get/ring_gets.hpp"
#include "serve/get/sources.hpp"

namespace sluice::serve {

namespace {

using wire::GetStatus;

// The address the request came from, where the client's receiver listens: the server never
// connects anywhere a request names, only back to its sender.
struct PeerAddress {
    std::string host;
    uint16_t port = 0;
};

PeerAddress peer_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
    char host[NI_MAXHOST];
    char port[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, port, sizeof port,
                      NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return {};
    std::string h = host;
    if (h.rfind("::ffff:", 0) == 0 && h.find('.') != std::string::npos) h = h.substr(7); // IPv4 on a dual-stack socket
    return {h, static_cast<uint16_t>(std::stoul(port))};
}

void reply(int fd, GetStatus status, const std::string& message, const wire::Mac& mac = {}, uint64_t files = 0,
           uint64_t bytes = 0) {
    wire::GetReply r;
    r.status = status;
    r.message = message;
    r.mac = mac;
    r.files = files;
    r.bytes = bytes;
    wire::Bytes out;
    encode_get_reply(out, r);
    send_all(fd, out, "GET_REPLY");
}

uint32_t done_status(ErrorCode c) { return 1 + static_cast<uint32_t>(c); }

bool loopback(const std::string& host) {
    in_addr a4{};
    if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    return host == "::1";
}

// Why this get's transfer is not for the get ring ("" when it is): the ring sends one whole
// regular file in clear text over the connections the client attached. Said in -v and counted
// in stats (get_sessions_thread), never a silent fallback.
std::string not_on_ring(Shared& sh, RingGets* ring, const wire::GetRequest& q, const GetSources& src, const std::string& host) {
    if (!ring || !ring->accepting()) return "the get ring is not running";
    if (q.reply_port != 0) return "--connect-back (the server connects out)";
    if (src.list.size() != 1 || src.files != 1) return "a tree (not on the get ring yet)";
    if (!loopback(host)) return "a remote client (its receiver encrypts; the get ring sends clear text only)";
    if (sh.opt.get_rate_limit) return "--get-rate-limit (not on the get ring yet)";
    return "";
}

bool to_ring(Shared& sh, RingGets& ring, int fd, std::unique_ptr<Attachments::Slot>& slot, const wire::GetRequest& q,
             const GetSources& src, const std::string& host, uint32_t rtt_us) {
    const FdSource& f = src.list[0];
    struct stat st{};
    if (::fstat(f.fd, &st) != 0) return false;
    RingStart s;
    s.request.reset(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    s.file.reset(::fcntl(f.fd, F_DUPFD_CLOEXEC, 0));
    if (!s.request || !s.file) return false;
    s.slot = std::move(slot);
    s.size = f.length;
    s.mtime_ns = f.mtime_ns >= 0 ? f.mtime_ns : int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    s.mode = f.mode;
    s.name = f.name;
    s.label = "'" + q.path + "' by " + host;
    s.streams = q.streams;
    s.receiver_token = q.receiver_token;
    s.attach_wait_ms = rtt_scaled_ms(SendOptions{}.connect_timeout_ms, rtt_us);
    s.idle_ms = sh.opt.send_timeout_ms;
    if (!ring.offer(s)) {
        slot = std::move(s.slot);
        return false;
    }
    sh.get_ring.fetch_add(1);
    return true;
}

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

// GET_ATTACH: this connection is one of a waiting get's transfer connections. It is handed
// over (a dup: the session thread's own fd closes as usual) and this thread is done.
void attach(Shared& sh, Attachments& att, int fd, wire::Span payload) {
    const GetNonce nonce = wire::decode_get_attach(payload);
    int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return;
    set_io_timeout(dup, 0); // as an accepted connection: the sender sets its own deadlines
    if (!att.attach(nonce, UniqueFd(dup), peer_address(fd).host) && sh.opt.verbose && sh.opt.log)
        sh.opt.log("get session: a GET_ATTACH for no waiting get (unknown, from another address, or one too many): closed");
}

// The hello, then the client's first frame: a request (returned, with the frame for its MAC)
// or an attach (handled here; nullopt). A malformed first frame is answered bad_request.
std::optional<wire::GetRequest> first_frame(Shared& sh, Attachments& att, int fd, const wire::GetHello& hello,
                                            wire::Bytes& frame) {
    wire::Bytes out;
    encode_get_hello(out, hello);
    send_all(fd, out, "GET_HELLO");
    unsigned char h[wire::kFrameHeaderBytes];
    recv_exact(fd, h, "GET_REQUEST");
    frame.assign(h, h + sizeof h);
    uint8_t type = wire::kGetRequest;
    try {
        uint32_t len = wire::decode_get_first_header(h, &type);
        frame.resize(sizeof h + len);
        recv_exact(fd, std::span(frame).subspan(sizeof h), type == wire::kGetAttach ? "GET_ATTACH" : "GET_REQUEST");
        if (type == wire::kGetAttach) {
            attach(sh, att, fd, std::span(frame).subspan(sizeof h));
            return std::nullopt;
        }
        sh.get_sessions.fetch_add(1);
        return wire::decode_get_request(std::span(frame).subspan(sizeof h));
    } catch (const Error& e) {
        if (e.code() != ErrorCode::protocol) throw;
        if (type == wire::kGetAttach) return std::nullopt; // nothing waits for an answer on it
        if (frame.size() == sizeof h) sh.get_sessions.fetch_add(1); // a bad header: not counted above
        reply(fd, GetStatus::bad_request, e.what());
        sh.get_failed.fetch_add(1);
        linger_close(fd);
        return std::nullopt;
    }
}

void session(Shared& sh, Attachments& att, RingGets* ring, int fd, const std::atomic<bool>& cancel, bool busy) {
    // Scaled with the round trip the connection's TCP handshake measured: a far client's
    // request and attachments take more of them (core/io/rtt_deadlines.hpp).
    const uint32_t rtt_us = smoothed_rtt_us(fd);
    set_io_timeout(fd, rtt_scaled_ms(sh.opt.request_timeout_ms, rtt_us));
    wire::GetHello hello;
    hello.token_required = !sh.opt.public_reads;
    wire::random_bytes(hello.nonce);
    wire::Bytes frame;
    std::optional<wire::GetRequest> request = first_frame(sh, att, fd, hello, frame);
    if (!request) return;
    Counted counted(sh);
    struct Linger {
        int fd;
        Counted& c;
        ~Linger() {
            if (!c.ok) linger_close(fd);
        }
    } linger{fd, counted};
    const wire::GetRequest& q = *request;
    wire::Bytes out;
    if (busy) {
        reply(fd, GetStatus::busy, "the server is sending " + std::to_string(sh.opt.max_get_sessions) + " gets; try again later");
        return;
    }
    if (q.version != wire::kVersion) {
        reply(fd, GetStatus::missing_feature, "protocol version " + std::to_string(q.version) + " (this server speaks " +
                                                  std::to_string(wire::kVersion) + ")");
        return;
    }
    if (!(q.features & wire::kFeatureGetSessions)) {
        reply(fd, GetStatus::missing_feature, "the request lacks feature bit 5 (get sessions)");
        return;
    }
    wire::Mac mac{};
    if (hello.token_required) {
        wire::Mac want = wire::client_hello_mac(sh.opt.token, hello.nonce, wire::get_request_signed_part(frame));
        if (!wire::macs_equal(want, wire::Mac(q.mac))) {
            reply(fd, GetStatus::bad_token, "wrong token");
            return;
        }
        mac = wire::server_auth_mac(sh.opt.token, q.nonce, hello.nonce);
    }
    GetSources src;
    try {
        src = open_get_sources(sh.root.get(), q.path, sh.opt.max_get_files);
    } catch (const Error& e) {
        reply(fd, GetStatus::bad_request, e.what(), mac);
        return;
    }
    if (src.status != 0) {
        reply(fd, src.status == 404 ? GetStatus::not_found : GetStatus::bad_request, src.message, mac);
        return;
    }
    if (src.list.empty()) {
        reply(fd, GetStatus::not_found, "'" + (q.path.empty() ? std::string("/") : q.path) + "' holds no regular files", mac);
        return;
    }
    const PeerAddress peer = peer_address(fd);
    const std::string& host = peer.host;
    if (sh.opt.get_mptcp && sh.opt.verbose && sh.opt.log) {
        const ConnectionMptcp m = mptcp_of(fd, 0, true, true);
        sh.opt.log("get session from " + host + ": the request came over " + (m.mptcp ? "MPTCP" : "plain TCP: " + m.why));
    }
    if (host.empty()) {
        reply(fd, GetStatus::bad_request, "the client's address is unknown (getpeername failed)", mac);
        return;
    }
    // reply_port 0: the client connects the transfer's connections out to this port.
    std::unique_ptr<Attachments::Slot> slot;
    if (q.reply_port == 0) {
        slot = att.open(q.nonce, 1 + q.streams, host);
        if (!slot) {
            reply(fd, GetStatus::bad_request, "a get with this request's nonce is already running", mac);
            return;
        }
    }
    std::string said = src.skipped ? std::to_string(src.skipped) + " entries not sent (" + std::to_string(src.links_out) +
                                         " symlinks leading out of the tree; fifos, sockets, devices)"
                                   : "";
    reply(fd, GetStatus::ok, said, mac, src.files, src.bytes);
    const std::string why = not_on_ring(sh, ring, q, src, host);
    if (why.empty() && to_ring(sh, *ring, fd, slot, q, src, host, rtt_us)) {
        counted.ok = true; // the ring counts it from here, and sends GET_DONE
        return;
    }
    sh.get_thread.fetch_add(1);
    if (sh.opt.verbose && sh.opt.log)
        sh.opt.log("get '" + q.path + "' by " + host + ": sent by a session thread: " + (why.empty() ? "the server is stopping" : why));

    SendOptions so;
    so.streams = q.streams;
    so.rate_limit = sh.opt.get_rate_limit;
    so.idle_timeout_ms = sh.opt.send_timeout_ms;
    so.cancel = &cancel;
    if (slot) {
        Attachments::Slot* sl = slot.get();
        const int wait_ms = rtt_scaled_ms(so.connect_timeout_ms, rtt_us);
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
        Stats st = send(src.list, Endpoint{host, q.reply_port ? q.reply_port : peer.port, q.receiver_token}, so);
        sh.get_bytes.fetch_add(st.bytes_sent);
        counted.ok = true;
    } catch (const Error& e) {
        done.status = done_status(e.code());
        done.message = e.what();
    }
    sh.get_open.fetch_sub(1);
    if (sh.opt.verbose && sh.opt.log)
        sh.opt.log("get '" + q.path + "' by " + host + ": " + (done.status ? done.message : std::string("sent")));
    out.clear();
    encode_get_done(out, done);
    set_io_timeout(fd, rtt_scaled_ms(sh.opt.send_timeout_ms, rtt_us));
    send_all(fd, out, "GET_DONE");
}

} // namespace

void serve_get_session(Shared& sh, Attachments& att, RingGets* ring, UniqueFd conn, const std::atomic<bool>& cancel,
                       bool busy) {
    try {
        session(sh, att, ring, conn.get(), cancel, busy);
    } catch (const Error& e) {
        // The client went away or broke the protocol before the transfer: nothing to tell it.
        if (sh.opt.verbose && sh.opt.log) sh.opt.log(std::string("get session: ") + e.what());
    }
}

} // namespace sluice::serve
