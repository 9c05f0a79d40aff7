// A get session's transfer on the ring with --connect-back (ring_session.hpp): the ring
// connects out to the client's receiver (IORING_OP_CONNECT on non-blocking sockets), the
// control connection first, then, once it is ready, the data streams, at most
// kParallelConnects of them between their connect and their hello at a time (as send() opens
// 8 at a time: the receiver drops a source's pending connections beyond 16, flood protection,
// recv/session/acceptor.cpp), each under a connect deadline scaled with a measured round trip
// (the request's for the control connection, the control connection's for the streams, as
// send() scales them); from then on the links are those of an attached get. Only ever to the
// address the request came from.
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/io/rtt_deadlines.hpp"
#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/ring_session.hpp"
#include "serve/get/judge.hpp"

namespace sluice::serve {

namespace {

constexpr unsigned kParallelConnects = 8;

} // namespace

bool connect_back_to(int request_fd, uint16_t port, int connect_ms, ConnectBack& out) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(request_fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
    if (ss.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
    else if (ss.ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
    else
        return false;
    out.addr = ss;
    out.len = len;
    out.name = peer_address(request_fd).host + ":" + std::to_string(port);
    out.connect_ms = connect_ms;
    return true;
}

void RingSession::connect_link() {
    UniqueFd fd(::socket(s_.back.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd)
        return fail(ErrorCode::network, "a socket to connect back to the client's receiver at " + s_.back.name + ": " +
                                            std::strerror(errno));
    // As send() sets its connections: a stream's last partial segment (STREAM_END) is not held
    // back by Nagle until the receiver's delayed ACK.
    set_nodelay(fd.get());
    auto l = std::make_unique<Link>(tag_base_ | (2 * links_.size()));
    l->fd = std::move(fd);
    l->index = static_cast<uint16_t>(links_.size());
    l->st = Link::St::connecting;
    links_.push_back(std::move(l));
    ++connecting_;
    Link& k = *links_.back();
    ring_.connect(k.wr_c, k.fd.get(), reinterpret_cast<const sockaddr*>(&s_.back.addr), s_.back.len);
}

void RingSession::on_connected(Link& l, Completion& c) {
    --connecting_;
    if (c.outcome() != Completion::Outcome::ok) {
        const int e = c.error();
        return fail(ErrorCode::network,
                    "connecting back to the client's receiver at " + s_.back.name + " (" + who(l) + "): " + std::strerror(e),
                    e == ECONNREFUSED || e == ECONNRESET ? ErrorCause::peer_reset : ErrorCause::none);
    }
    l.st = Link::St::hello;
    deadline_ms_ = now_ms_ + (connecting_ > 0 ? stream_connect_ms_ : links_.size() < 1u + s_.streams ? s_.attach_wait_ms : s_.idle_ms);
    read_link(l); // the receiver speaks first (ServerHello)
}

void RingSession::connect_streams() {
    // The control connection's handshake measured the path: the streams' connects scale with
    // it (core/io/rtt_deadlines.hpp), as send()'s do.
    stream_connect_ms_ = rtt_scaled_ms(SendOptions{}.connect_timeout_ms, smoothed_rtt_us(links_[0]->fd.get()));
    deadline_ms_ = now_ms_ + stream_connect_ms_;
    streams_left_ = s_.streams;
    connect_more();
}

void RingSession::connect_more() {
    unsigned opening = 0; // data streams between their connect and our ClientHello
    for (size_t i = 1; i < links_.size(); ++i)
        if (links_[i]->st == Link::St::connecting || links_[i]->st == Link::St::hello) ++opening;
    for (; streams_left_ > 0 && opening < kParallelConnects && !ended_; ++opening) {
        --streams_left_;
        connect_link();
    }
}

} // namespace sluice::serve
