#include "serve/engine/worker.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/io/sys_error.hpp"
#include "serve/http/response.hpp"

namespace sluice::serve {

namespace {

constexpr int kTickMs = 200;
constexpr uint16_t kGroup = 1;
constexpr unsigned kProvidedCount = 512; // x 4 KiB per thread: requests are small; taken back at once
constexpr unsigned kProvidedSize = 4096;

} // namespace

int64_t monotonic_ms() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000;
}

Worker::Worker(Shared& shared, unsigned index, UniqueFd listen_fd)
    : sh_(shared), index_(index), cnt_(*shared.counters[index]), wake_(*shared.wakes[index]), listen_(std::move(listen_fd)),
      max_conns_(std::max(1u, shared.opt.max_connections / static_cast<unsigned>(shared.counters.size()))),
      conns_(new Conn[max_conns_]), files_(shared.root.get(), shared.cold_check) {
    free_conns_.reserve(max_conns_);
    for (uint32_t i = max_conns_; i-- > 0;) {
        conns_[i].recv_c.tag = conns_[i].poll_c.tag = i;
        free_conns_.push_back(i);
    }
    ring_ = std::make_unique<Ring>(1024); // made on this thread: SINGLE_ISSUER ties it here
    const RingFeatures& f = ring_->features();
    int err = 0;
    provided_ = ProvidedBuffers::create(*ring_, kGroup, kProvidedCount, kProvidedSize, &err);
    // Provided-buffer rings and multishot accept came with Linux 5.19, multishot recv with
    // 6.0: the kernel is asked (a refused registration here, EINVAL on the first multishot
    // request in on_accept / on_recv), not its version guessed, and the path taken is noted.
    provided_recv_ = provided_ != nullptr;
    accept_multishot_ = f.op_accept;
    if (index_ == 0) {
        std::lock_guard lock(sh_.paths_mu);
        sh_.ring_mode = f.setup_mode();
        sh_.recv_path = provided_ ? "multishot recv into provided buffers"
                                  : std::string("recv into per-connection buffers (provided-buffer ring refused: ") +
                                        std::strerror(err) + ")";
        sh_.accept_path = "multishot accept, SO_REUSEPORT socket per thread";
    }
}

Worker::~Worker() {
    // Ends every request of the ring before anything they point into goes (the buffers,
    // the connections, the provided-buffer ring's registration).
    for (uint32_t i = 0; i < max_conns_; ++i) {
        Conn& k = conns_[i];
        if (k.fd >= 0) ::shutdown(k.fd, SHUT_RDWR);
        ring_->cancel(k.recv_c);
        ring_->cancel(k.poll_c);
    }
    ring_->cancel(accept_c_);
    ring_->cancel(wake_c_);
    while (ring_->in_flight() > 0) {
        Completion* c = ring_->wait_for(100);
        if (!c) {
            if (accept_c_.busy()) ring_->cancel(accept_c_);
            if (wake_c_.busy()) ring_->cancel(wake_c_);
        }
    }
    for (uint32_t i = 0; i < max_conns_; ++i) {
        Conn& k = conns_[i];
        if (k.fd >= 0) ::close(k.fd);
    }
}

void Worker::run() {
    arm_accept();
    ring_->read(wake_c_, wake_.fd(), &wake_value_, sizeof wake_value_, 0);
    now_ms_ = monotonic_ms();
    next_tick_ms_ = now_ms_ + kTickMs;
    for (;;) {
        Completion* c = ring_->wait_for(static_cast<int>(std::max<int64_t>(1, next_tick_ms_ - now_ms_)));
        now_ms_ = monotonic_ms();
        if (c) dispatch(*c);
        if (now_ms_ >= next_tick_ms_) {
            tick();
            next_tick_ms_ = now_ms_ + kTickMs;
        }
        if (draining_ && cnt_.open.load(std::memory_order_relaxed) == 0 && !accept_c_.busy()) return;
    }
}

void Worker::dispatch(Completion& c) {
    if (&c == &accept_c_) return on_accept(c);
    if (&c == &wake_c_) return on_wake();
    Conn& k = conns_[c.tag];
    if (&c == &k.recv_c) return on_recv(k, c);
    // the POLLOUT a parked response (or a handshake's flight) waited for
    if (k.phase == Phase::closing) return maybe_free(k);
    if (c.outcome() != Completion::Outcome::ok) return close_conn(k);
    if (k.tls && k.tls->shake) return tls_shake(k);
    if (pump(k) == Pump::done) resume(k);
}

void Worker::resume(Conn& k) {
    finish_response(k);
    resume_input(k);
}

void Worker::resume_input(Conn& k) {
    serve_input(k);
    settle(k);
    // Without provided buffers the recv writes into the connection's buffer, which
    // serve_input moves: it is armed only while no response is in flight.
    if (!provided_recv_ && k.phase != Phase::closing && k.phase != Phase::sending && !k.recv_c.busy()) arm_recv(k);
}

void Worker::arm_accept() {
    if (draining_) return;
    ring_->accept(accept_c_, listen_.get(), SOCK_NONBLOCK | SOCK_CLOEXEC, accept_multishot_);
}

void Worker::on_accept(Completion& c) {
    const bool more = c.flags() & IORING_CQE_F_MORE;
    if (c.outcome() == Completion::Outcome::ok) {
        int fd = c.result();
        cnt_.add(cnt_.accepted);
        std::unique_ptr<TlsConn> tls;
        if (sh_.web_tls && !draining_ && !free_conns_.empty()) {
            try {
                tls = std::make_unique<TlsConn>(*sh_.web_tls);
            } catch (const Error&) { // OpenSSL could not set one up (memory): this client only
            }
        }
        if (draining_ || free_conns_.empty() || (sh_.web_tls && !tls)) {
            ::close(fd); // over the bound: closed at once, never queued behind the others
            cnt_.add(cnt_.refused);
        } else {
            Conn& k = conns_[free_conns_.back()];
            free_conns_.pop_back();
            k.fd = fd;
            k.in_use = true;
            k.keep_alive = true;
            k.peer_done = false;
            k.phase = Phase::idle;
            k.tls = std::move(tls); // its handshake's deadline is the first request's (below)
            k.client = clients_.attach(fd, now_ms_);
            // A new connection owes its first request within the request timeout (a client that
            // connects and says nothing is a slowloris); keep-alive waits get the idle timeout.
            k.deadline_ms = now_ms_ + sh_.opt.request_timeout_ms;
            int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            cnt_.add(cnt_.open);
            arm_recv(k);
        }
    }
    if (more || accept_c_.busy() || c.outcome() == Completion::Outcome::cancelled) return;
    if (c.outcome() == Completion::Outcome::failed && c.error() == EINVAL && accept_multishot_ && !draining_) {
        accept_multishot_ = false; // before Linux 5.19: one accept per connection
        note_path(sh_.accept_path, "accept, one per connection (multishot accept refused: EINVAL), SO_REUSEPORT socket per thread");
        return arm_accept();
    }
    // EMFILE and the like would fail again at once: re-armed at the next tick instead, while
    // the connection waits in the backlog.
    if (c.outcome() == Completion::Outcome::failed)
        accept_retry_ = true;
    else
        arm_accept();
}

void Worker::note_path(std::string& field, const char* text) {
    std::lock_guard lock(sh_.paths_mu);
    field = text;
    if (sh_.opt.verbose && sh_.opt.log) sh_.opt.log(std::string("slower path: ") + text);
}

void Worker::arm_recv(Conn& k) {
    if (provided_recv_) {
        ring_->recv_provided(k.recv_c, k.fd, kGroup, recv_ms_);
        return;
    }
    if (k.tls) { // ciphertext goes to the record buffer, which always has room for the rest of a record
        TlsConn& t = *k.tls;
        ring_->recv(k.recv_c, k.fd, t.rx + t.rx_len, sizeof t.rx - t.rx_len, 0);
        return;
    }
    if (k.buf == kNoBuf) k.buf = take_buf();
    if (k.in_len >= IoBuf::kIn) return close_conn(k); // a full buffer of unparsed input
    IoBuf& b = *bufs_[k.buf];
    ring_->recv(k.recv_c, k.fd, b.in + k.in_len, IoBuf::kIn - k.in_len, 0);
}

void Worker::on_recv(Conn& k, Completion& c) {
    using O = Completion::Outcome;
    const bool more = c.flags() & IORING_CQE_F_MORE;
    if (k.phase == Phase::closing) {
        if (c.outcome() == O::ok && provided_recv_ && (c.flags() & IORING_CQE_F_BUFFER))
            provided_->give_back(static_cast<uint16_t>(c.flags() >> IORING_CQE_BUFFER_SHIFT));
        return maybe_free(k);
    }
    if (c.outcome() == O::failed && c.error() == EINVAL && recv_ms_) {
        // Linux 5.19 has provided-buffer rings but not multishot recv (6.0): one recv per read.
        recv_ms_ = false;
        note_path(sh_.recv_path, "recv into provided buffers, one per read (multishot recv refused: EINVAL)");
        if (!k.recv_c.busy()) arm_recv(k);
        return;
    }
    if (c.outcome() == O::failed && c.error() == ENOBUFS) { // every provided buffer taken: re-arm
        if (!k.recv_c.busy()) arm_recv(k);
        return;
    }
    if (c.outcome() == O::retry) {
        if (!k.recv_c.busy()) arm_recv(k);
        return;
    }
    if (c.outcome() != O::ok) return close_conn(k);
    const size_t n = static_cast<size_t>(c.result());
    if (n == 0) { // the client shut its side: answer what it sent, then close
        k.peer_done = true;
        if (k.tls && (k.tls->shake || k.tls->rx_len > 0)) { // mid-handshake, or a record cut short
            cnt_.add(k.tls->shake ? cnt_.tls_failed : cnt_.tls_bad_records);
            if (k.phase != Phase::sending && k.phase != Phase::body) return close_conn(k);
        }
        if (k.phase == Phase::body) {
            if (k.up && k.up->left == 0) return; // whole, being committed: answered, then closed
            return close_conn(k); // the body ends short: nothing is stored
        }
        if (k.phase != Phase::sending) {
            if (k.in_len == 0) return close_conn(k);
            serve_input(k);
            if (k.phase != Phase::sending && k.phase != Phase::closing) close_conn(k);
        }
        return;
    }
    clients_.received(k.client, n);
    bool ok = true;
    if (k.tls) { // opened here; what they carry takes the path below's plain bytes (take_input)
        const auto id = static_cast<uint16_t>(c.flags() >> IORING_CQE_BUFFER_SHIFT);
        tls_received(k, provided_recv_ ? reinterpret_cast<const unsigned char*>(provided_->data(id)) : nullptr, n);
        if (provided_recv_) provided_->give_back(id);
    } else if (provided_recv_) {
        const auto id = static_cast<uint16_t>(c.flags() >> IORING_CQE_BUFFER_SHIFT);
        ok = take_input(k, provided_->data(id), n);
        provided_->give_back(id);
    } else {
        k.in_len += static_cast<uint32_t>(n);
        ok = true;
    }
    if (!ok) return close_conn(k); // more pipelined input than a client may queue: hostile or broken
    if (!k.in_use) return;
    if (k.phase != Phase::sending) {
        serve_input(k);
        settle(k);
    }
    // !in_use: a close above found no request of the ring left and freed the slot already.
    if (!k.in_use || k.phase == Phase::closing || more || k.recv_c.busy()) return;
    if (provided_recv_ || k.phase != Phase::sending) arm_recv(k);
}

bool Worker::take_input(Conn& k, const char* p, size_t len) {
    if (k.phase == Phase::body && k.in_len == 0 && k.up) { // body bytes go to the file from here
        const size_t used = take_body(k, p, len);
        p += used;
        len -= used;
    }
    return len == 0 || k.phase == Phase::closing || !k.in_use || append_input(k, p, len);
}

bool Worker::append_input(Conn& k, const char* data, size_t len) {
    if (k.buf == kNoBuf) k.buf = take_buf();
    if (k.in_len + len > IoBuf::kIn) return false;
    std::memcpy(bufs_[k.buf]->in + k.in_len, data, len);
    k.in_len += static_cast<uint32_t>(len);
    return true;
}

void Worker::serve_input(Conn& k) {
    while (k.phase != Phase::sending && k.phase != Phase::closing && k.in_len > 0) {
        IoBuf& b = *bufs_[k.buf];
        if (k.phase == Phase::body) {
            if (!k.up || k.up->left == 0) return; // being committed: what follows waits for the answer
            const size_t used = take_body(k, b.in, k.in_len);
            if (k.phase == Phase::closing) return;
            std::memmove(b.in, b.in + used, k.in_len - used);
            k.in_len -= static_cast<uint32_t>(used);
            continue;
        }
        http::Request req;
        http::ParseOutcome p = http::parse_request(std::string_view(b.in, k.in_len), req);
        if (p.result == http::ParseResult::need_more) {
            if (k.phase == Phase::idle) { // the first byte of a request starts its deadline
                k.phase = Phase::reading;
                k.deadline_ms = now_ms_ + sh_.opt.request_timeout_ms;
            }
            if (k.peer_done) close_conn(k);
            return;
        }
        if (p.result == http::ParseResult::error) {
            k.in_len = 0;
            respond_simple(k, p.status, false, http::reason(p.status));
            return;
        }
        cnt_.add(cnt_.requests);
        clients_.request(k.client, now_ms_);
        const size_t used = req.head_bytes;
        handle(k, req); // answers from the head, which stays in the buffer until here
        if (k.phase == Phase::closing) return;
        std::memmove(b.in, b.in + used, k.in_len - used);
        k.in_len -= static_cast<uint32_t>(used);
    }
}

void Worker::settle(Conn& k) {
    if (k.phase == Phase::sending || k.phase == Phase::closing || k.phase == Phase::body) return;
    if (k.in_len == 0) {
        if (k.peer_done) return close_conn(k);
        if (!provided_recv_ && k.recv_c.busy()) return; // the buffer is the recv's target
        release_buf(k);
        if (k.phase != Phase::idle) {
            k.phase = Phase::idle;
            k.deadline_ms = now_ms_ + sh_.opt.idle_timeout_ms;
        }
    }
}

} // namespace sluice::serve
