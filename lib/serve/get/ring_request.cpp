// A connection's first frame on the get ring (ring_request.hpp). Every socket is
// non-blocking; a call that would wait arms a one-shot poll, and the request goes on when it
// completes.
#include "serve/get/ring_request.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "core/io/tcp_tuning.hpp"
#include "core/wire/auth.hpp"
#include "serve/engine/shared.hpp"

namespace sluice::serve {

namespace {

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

constexpr size_t kLingerBytes = 64u << 10;
constexpr int kLingerMs = 1000;

} // namespace

RingRequest::RingRequest(UniqueFd fd, Shared& sh, Ring& ring, uint64_t tag_base, int64_t now_ms)
    : sh_(sh), ring_(ring), now_ms_(now_ms), rd_c_(tag_base), wr_c_(tag_base | 1) {
    asked_.fd = std::move(fd);
    // A far client's request takes more round trips (core/io/rtt_deadlines.hpp).
    asked_.rtt_us = smoothed_rtt_us(asked_.fd.get());
    deadline_ms_ = now_ms + rtt_scaled_ms(sh.opt.request_timeout_ms, asked_.rtt_us);
    asked_.hello.token_required = !sh.opt.public_reads;
    // Bound transfer tokens need the shared token: a --public server has none to bind with.
    if (asked_.hello.token_required) asked_.hello.features |= wire::kFeatureGetBoundTransfer;
    asked_.hello.features |= wire::kFeatureGetPush; // understood; the reply says whether allowed
    if (sh.get_certs) {
        asked_.hello.features |= wire::kFeatureGetCertificate | wire::kFeatureGetPushCertificate;
        peeked_ = false;
    }
    wire::random_bytes(asked_.hello.nonce);
    encode_get_hello(out_, asked_.hello);
    in_.reserve(wire::kFrameHeaderBytes + wire::kMaxGetPayload);
    flush();
    if (st_ == St::reading) read_more();
}

UniqueFd RingRequest::take() {
    st_ = St::done;
    ring_.cancel(rd_c_);
    ring_.cancel(wr_c_);
    return std::move(asked_.fd);
}

void RingRequest::close() {
    // Certificate mode counted the session when TLS began: one that ends before its request is
    // a failure (a refused certificate, a client gone mid-handshake).
    if (tls_ && !requested_ && st_ != St::done) sh_.get_failed.fetch_add(1);
    st_ = St::done;
    ring_.cancel(rd_c_);
    ring_.cancel(wr_c_);
    asked_.fd.reset();
}

void RingRequest::cancel() {
    if (st_ != St::done) close();
}

void RingRequest::tick(int64_t now_ms) {
    now_ms_ = now_ms;
    if (st_ == St::done || now_ms < deadline_ms_ || walking) return;
    // A client that sent no whole first frame (or, in certificate mode, did not end its
    // handshake) in time gets no answer; a refusal's linger just ends.
    if (st_ == St::replying && ok_reply_) sh_.get_failed.fetch_add(1); // an ok the client never took: no transfer
    if (sh_.opt.verbose && sh_.opt.log && st_ == St::reading)
        sh_.opt.log("get session: no whole first frame within the request deadline: closed");
    if (sh_.opt.verbose && sh_.opt.log && st_ == St::shaking)
        sh_.opt.log("get session in certificate mode: the TLS handshake did not end within the request deadline: closed");
    close();
}

void RingRequest::on_completion(uint64_t low, Completion& c, int64_t now_ms) {
    now_ms_ = now_ms;
    if (st_ == St::done || c.outcome() == Completion::Outcome::cancelled) return;
    if (st_ == St::shaking) return shake(); // what it waited for, a read or a write, has come
    if (low & 1) {
        flush();
        if (st_ == St::reading && !rd_c_.busy()) read_more();
        return;
    }
    if (st_ == St::reading) return read_more();
    if (st_ == St::lingering) return drain();
}

void RingRequest::flush() {
    while (out_off_ < out_.size()) {
        ssize_t n = ::send(asked_.fd.get(), out_.data() + out_off_, out_.size() - out_off_, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && would_block(errno)) {
            if (!wr_c_.busy()) ring_.poll(wr_c_, asked_.fd.get(), POLLOUT);
            return;
        }
        if (n < 0) {
            if (st_ == St::replying && ok_reply_) sh_.get_failed.fetch_add(1);
            return close(); // the client went away: nobody to tell
        }
        out_off_ += static_cast<size_t>(n);
    }
    out_.clear();
    out_off_ = 0;
    if (st_ != St::replying) return;
    if (ok_reply_) {
        st_ = St::ready;
        return;
    }
    linger();
}

void RingRequest::linger() {
    st_ = St::lingering;
    ::shutdown(asked_.fd.get(), SHUT_WR);
    deadline_ms_ = now_ms_ + kLingerMs;
    drain();
}

void RingRequest::drain() {
    unsigned char sink[4096];
    for (;;) {
        ssize_t n = ::recv(asked_.fd.get(), sink, sizeof sink, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && would_block(errno) && drained_ < kLingerBytes) {
            if (!rd_c_.busy()) ring_.poll(rd_c_, asked_.fd.get(), POLLIN | POLLRDHUP);
            return;
        }
        if (n <= 0 || (drained_ += static_cast<size_t>(n)) >= kLingerBytes) return close();
    }
}

// A client that verifies the server begins a TLS handshake where a frame would be: looked at
// (MSG_PEEK, so OpenSSL reads the whole ClientHello itself: shake()), never read here.
bool RingRequest::peek_tls() {
    for (;;) {
        unsigned char b = 0;
        ssize_t n = ::recv(asked_.fd.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && would_block(errno)) {
            if (!rd_c_.busy()) ring_.poll(rd_c_, asked_.fd.get(), POLLIN);
            return false;
        }
        if (n <= 0) {
            close(); // the client went before its first byte: nobody to answer
            return false;
        }
        peeked_ = true;
        if (b == wire::kTlsHandshakeRecord) st_ = St::tls;
        return true;
    }
}

size_t RingRequest::first_frame_size() {
    if (in_.size() < wire::kFrameHeaderBytes) return wire::kFrameHeaderBytes;
    uint8_t type = wire::kGetRequest;
    try {
        return wire::kFrameHeaderBytes + wire::decode_get_first_header(wire::Span(in_.data(), wire::kFrameHeaderBytes), &type);
    } catch (const Error& e) {
        if (type == wire::kGetAttach) {
            close(); // nothing waits for an answer on it
            return 0;
        }
        count_session(type);
        refuse(e.what());
        return 0;
    }
}

void RingRequest::read_more() {
    if (!peeked_ && (!peek_tls() || st_ != St::reading)) return;
    if (opener_) return read_records();
    // Never past the first frame: what follows an attach belongs to the transfer.
    for (;;) {
        const size_t want = first_frame_size();
        if (want == 0) return;
        if (in_.size() == want) return on_frame();
        const size_t at = in_.size();
        in_.resize(want);
        ssize_t n = ::recv(asked_.fd.get(), in_.data() + at, want - at, MSG_DONTWAIT);
        in_.resize(at + (n > 0 ? static_cast<size_t>(n) : 0));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && would_block(errno)) {
            if (!rd_c_.busy()) ring_.poll(rd_c_, asked_.fd.get(), POLLIN);
            return;
        }
        if (n <= 0) return close(); // the client went before its first frame: nobody to answer
    }
}

void RingRequest::on_frame() {
    uint8_t type = wire::kGetRequest;
    wire::decode_get_first_header(wire::Span(in_.data(), wire::kFrameHeaderBytes), &type);
    const wire::Span payload(in_.data() + wire::kFrameHeaderBytes, in_.size() - wire::kFrameHeaderBytes);
    if (type == wire::kGetAttach) {
        if (tls_) {
            if (sh_.opt.verbose && sh_.opt.log) sh_.opt.log("get session: GET_ATTACH on a certificate-mode request connection: closed");
            return close();
        }
        try {
            nonce_ = wire::decode_get_attach(payload);
        } catch (const Error&) {
            return close();
        }
        st_ = St::attach;
        return;
    }
    count_session(type);
    try {
        asked_.q = wire::decode_get_request(payload);
    } catch (const Error& e) {
        return refuse(e.what());
    }
    asked_.frame = std::move(in_);
    const PeerAddress p = peer_address(asked_.fd.get());
    asked_.host = p.host;
    asked_.peer_port = p.port;
    st_ = St::request;
}

void RingRequest::count_session(uint8_t type) {
    requested_ = true;
    asked_.push = type == wire::kPushRequest; // the same payload as a get's (serve/get/push_sessions.hpp)
    if (asked_.push) sh_.pushes.fetch_add(1);
    else if (!tls_) sh_.get_sessions.fetch_add(1); // certificate mode counted it when TLS began
    if (asked_.push && tls_) { // counted as a get when TLS began, before its request said which
        sh_.get_sessions.fetch_sub(1);
        sh_.get_certificate.fetch_sub(1);
        sh_.push_certificate.fetch_add(1);
    }
}

void RingRequest::refuse(const std::string& why) {
    (asked_.push ? sh_.push_refused : sh_.get_failed).fetch_add(1);
    st_ = St::request;
    wire::GetReply r;
    r.status = wire::GetStatus::bad_request;
    r.message = why;
    reply(r);
}

void RingRequest::reply(const wire::GetReply& r) {
    ok_reply_ = r.status == wire::GetStatus::ok;
    st_ = St::replying;
    encode_get_reply(out_, r);
    if (sealer_) { // certificate mode: in records (out_ held nothing else: GET_HELLO went long ago)
        wire::Bytes plain;
        plain.swap(out_);
        sealer_->seal_append(plain.data(), plain.size(), out_);
    }
    flush();
}

} // namespace sluice::serve
