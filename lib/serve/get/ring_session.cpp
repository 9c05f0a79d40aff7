// A get session's transfer on the ring: its connections (attached, or connected back:
// ring_session_connect.cpp), their completions and reading (ring_session.hpp). Every socket
// is non-blocking; a call that would wait arms a one-shot poll instead, and the session goes
// on when it completes.
#include "serve/get/ring_session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/io/socket.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/codec_get.hpp"
#include "serve/engine/shared.hpp"

namespace sluice::serve {

namespace {

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

ErrorCause cause_of(int e) { return e == ECONNRESET || e == EPIPE ? ErrorCause::peer_reset : ErrorCause::none; }

} // namespace

RingSession::RingSession(RingStart s, Shared& sh, Ring& ring, SumPool& pool, uint32_t slot, uint32_t gen, int64_t now_ms)
    : sh_(sh), ring_(ring), pool_(pool), s_(std::move(s)), slot_(slot), gen_(gen),
      tag_base_(static_cast<uint64_t>(slot) << kTagBits), now_ms_(now_ms), req_c_(tag_base_ | kRequestTag) {
    deadline_ms_ = now_ms + (s_.back.len ? s_.back.connect_ms : s_.attach_wait_ms);
    refilled_ms_ = now_ms;
    open_files();
    wire::random_bytes(transfer_id_);
    sh_.get_open.fetch_add(1);
    counted_open_ = true;
    watch_request();
    if (s_.back.len)
        connect_link(); // the control connection; the streams once it is ready
    else
        on_attach(now_ms);
}

RingSession::~RingSession() {
    if (counted_open_) sh_.get_open.fetch_sub(1);
}

bool RingSession::finished() const {
    if (!ended_ || sums_in_flight_ > 0 || req_c_.busy()) return false;
    for (const auto& l : links_)
        if (l->rd_c.busy() || l->wr_c.busy()) return false;
    return true;
}

// The client sends nothing more on its request connection: an end of it before the transfer's
// end is the client gone (it closes it once its receiver has finished, so not after that).
void RingSession::watch_request() { ring_.poll(req_c_, s_.request.get(), POLLIN | POLLRDHUP); }

void RingSession::on_attach(int64_t now_ms) {
    now_ms_ = now_ms;
    if (ended_ || !s_.slot) return;
    while (s_.slot) { // reset once every connection asked for is in
        UniqueFd fd = s_.slot->try_take();
        if (!fd) break;
        add_link(std::move(fd));
        if (ended_) return;
    }
    drive();
}

void RingSession::add_link(UniqueFd fd) {
    const int fl = ::fcntl(fd.get(), F_GETFL);
    if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl | O_NONBLOCK) < 0) return fail(ErrorCode::network, "fcntl O_NONBLOCK failed");
    // As send() sets every stream (and connect_link() the ones the ring connects): a block's
    // last partial segment is not held by Nagle until the receiver's delayed ACK.
    set_nodelay(fd.get());
    auto l = std::make_unique<Link>(tag_base_ | (2 * links_.size()));
    l->fd = std::move(fd);
    l->index = static_cast<uint16_t>(links_.size());
    links_.push_back(std::move(l));
    deadline_ms_ = now_ms_ + (links_.size() < 1u + s_.streams ? s_.attach_wait_ms : s_.idle_ms);
    if (links_.size() == 1u + s_.streams) s_.slot.reset(); // all in: the nonce is free again
    read_link(*links_.back());
}

void RingSession::on_completion(uint64_t low, Completion& c, int64_t now_ms) {
    now_ms_ = now_ms;
    if (ended_) return;
    if (low == kRequestTag) {
        if (c.outcome() == Completion::Outcome::cancelled) return;
        if (transfer_end_) return; // the client's receiver is done; it closes this connection
        char b;
        ssize_t n = ::recv(s_.request.get(), &b, 1, MSG_DONTWAIT | MSG_PEEK);
        if (n < 0 && would_block(errno)) return watch_request();
        if (n > 0) return fail(ErrorCode::protocol, "the client sent more on its request connection after GET_REQUEST");
        return fail(ErrorCode::network, "the client closed its request connection mid-transfer", ErrorCause::peer_closed);
    }
    const size_t li = low / 2;
    if (li >= links_.size()) return;
    Link& l = *links_[li];
    if (c.outcome() == Completion::Outcome::cancelled) return;
    if (l.st == Link::St::connecting)
        on_connected(l, c);
    else if (l.st == Link::St::shaking)
        shake(l); // what it waited for, a read or a write, has come
    else if (low % 2 == 0)
        read_link(l);
    if (!ended_) drive();
}

void RingSession::read_link(Link& l) {
    // Data streams read only their handshake; control reads until the end, a frame of at most
    // kMaxControlFrame at a time. Never past what the current step takes: a later step's bytes wait.
    constexpr size_t kCap = wire::kFrameHeaderBytes + kMaxControlFrame;
    for (;;) {
        if (l.st == Link::St::hello && l.in.size() >= wire::kServerHelloBytes) {
            // A data stream's hello only after the control connection's is accepted: the
            // receiver takes a transfer's streams only once it knows the transfer.
            if (l.index != 0 && links_[0]->st != Link::St::ready) return;
            on_hello_bytes(l);
            if (ended_) return;
            continue;
        }
        if (l.st == Link::St::auth && l.in.size() >= wire::kServerAuthBytes) {
            on_hello_bytes(l);
            if (ended_) return;
            continue;
        }
        if (l.st == Link::St::shaking) return shake(l); // OpenSSL reads the socket itself
        if (l.st == Link::St::ready) {
            if (l.index != 0) return;
            if (l.tls) return read_records(l);
            on_control_bytes(l.in); // takes every whole frame
            if (ended_) return;
        }
        const size_t step = l.st == Link::St::hello ? wire::kServerHelloBytes
                            : l.st == Link::St::auth ? wire::kServerAuthBytes
                                                     : kCap;
        if (l.in.size() >= step) return fail(ErrorCode::protocol, "the receiver's control frame is over 256 KiB");
        if (!receive(l, step - l.in.size())) return;
    }
}

bool RingSession::sent(Link& l, ssize_t n) {
    if (n < 0 && errno == EINTR) return true;
    if (n < 0 && would_block(errno)) {
        ring_.poll(l.wr_c, l.fd.get(), POLLOUT);
        return false;
    }
    if (n < 0) {
        const int e = errno;
        fail(ErrorCode::network, "sending to the client's " + who(l) + ": " + std::strerror(e), cause_of(e));
        return false;
    }
    deadline_ms_ = now_ms_ + s_.idle_ms;
    return true;
}

bool RingSession::receive(Link& l, size_t most) {
    unsigned char buf[4096];
    ssize_t n;
    do {
        n = ::recv(l.fd.get(), buf, std::min(sizeof buf, most), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && would_block(errno)) {
        if (!l.rd_c.busy()) ring_.poll(l.rd_c, l.fd.get(), POLLIN);
        return false;
    }
    if (n <= 0) {
        const int e = n < 0 ? errno : 0;
        fail(ErrorCode::network,
             "the client's " + who(l) + (n == 0 ? " closed" : std::string(" failed: ") + std::strerror(e)) + " before the transfer ended",
             n == 0 ? ErrorCause::peer_closed : cause_of(e));
        return false;
    }
    deadline_ms_ = now_ms_ + s_.idle_ms;
    l.in.insert(l.in.end(), buf, buf + n);
    return true;
}

} // namespace sluice::serve
