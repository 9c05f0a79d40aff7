// A connection's life outside one request: waking for finished pool jobs, the deadlines
// checked every tick, the drain after stop(), closing and freeing a slot, and the pool of
// input buffers a connection holds only while a request is read or answered.
#include <sys/socket.h>
#include <unistd.h>

#include "serve/engine/worker.hpp"

namespace sluice::serve {

void Worker::on_wake() {
    wake_.take(cold_done_);
    for (const ColdDone& d : cold_done_) {
        Conn& k = conns_[d.conn];
        if (k.gen != d.gen || !k.cold_pending) continue;
        k.cold_pending = false;
        if (k.phase == Phase::closing) {
            maybe_free(k);
            continue;
        }
        if (k.up && k.up->committing) { // an upload's fsyncs and rename are done: answer it
            k.up->committing = false;
            upload_done(k);
            if (k.phase == Phase::idle || k.phase == Phase::reading) resume_input(k);
            continue;
        }
        if (d.err != 0) {
            close_conn(k);
            continue;
        }
        k.deadline_ms = now_ms_ + sh_.opt.send_timeout_ms;
        if (pump(k) == Pump::done) resume(k);
    }
    cold_done_.clear();
    if (sh_.stopping.load() && !draining_) begin_drain();
    ring_->read(wake_c_, wake_.fd(), &wake_value_, sizeof wake_value_, 0);
}

void Worker::tick() {
    clients_.tick(now_ms_, *sh_.clients[index_]);
    if (sh_.stopping.load() && !draining_) begin_drain();
    if (accept_retry_ && !draining_) {
        accept_retry_ = false;
        arm_accept();
    }
    const bool drain_over = draining_ && now_ms_ >= drain_deadline_ms_;
    // Every slot each tick up to kSweepWhole of them; above that a fifth per tick, so a thread
    // holding a million idle connections does not walk its 190 MB slab five times a second
    // (the active ones would pay for it): each slot is still seen every second, which is then
    // how late a deadline may be met.
    constexpr uint32_t kSweepWhole = 65536;
    const uint32_t n = drain_over || max_conns_ <= kSweepWhole ? max_conns_ : (max_conns_ + 4) / 5;
    for (uint32_t s = 0; s < n; ++s) {
        Conn& k = conns_[sweep_at_];
        sweep_at_ = sweep_at_ + 1 == max_conns_ ? 0 : sweep_at_ + 1;
        if (!k.in_use || k.phase == Phase::closing) continue;
        // A cold read is bounded by the disk, not by the client: its deadline starts after it.
        if (k.cold_pending && !drain_over) continue;
        if (drain_over || now_ms_ >= k.deadline_ms) {
            if (!drain_over) cnt_.add(cnt_.timed_out);
            if (!drain_over && k.tls && k.tls->shake) cnt_.add(cnt_.tls_timed_out); // a slowloris on the handshake
            close_conn(k);
        }
    }
}

void Worker::begin_drain() {
    draining_ = true;
    drain_deadline_ms_ = now_ms_ + sh_.opt.drain_timeout_ms;
    ::shutdown(listen_.get(), SHUT_RD); // ends the accept; queued connections are reset
    ring_->cancel(accept_c_);
    for (uint32_t i = 0; i < max_conns_; ++i) {
        Conn& k = conns_[i];
        if (!k.in_use || k.phase == Phase::closing) continue;
        if (k.phase == Phase::sending || k.phase == Phase::body) {
            k.keep_alive = false; // finish this response (or upload and its answer), then close
        } else {
            close_conn(k);
        }
    }
}

void Worker::close_conn(Conn& k) {
    if (k.phase == Phase::closing) return;
    k.phase = Phase::closing;
    ::shutdown(k.fd, SHUT_RDWR); // ends the recv (and a poll) on this socket
    ring_->cancel(k.recv_c);
    ring_->cancel(k.poll_c);
    maybe_free(k);
}

void Worker::maybe_free(Conn& k) {
    if (k.recv_c.busy() || k.poll_c.busy() || k.cold_pending) return;
    // Reads what the client sent and nobody will read (bounded): closing with unread input
    // would reset the connection and could destroy the response it is still receiving.
    char sink[4096];
    for (int i = 0; i < 16 && ::recv(k.fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
    }
    ::close(k.fd);
    k.fd = -1;
    k.file.reset();
    k.file_fd = -1;
    k.checked_end = k.ahead_end = 0;
    k.corked = false;
    k.body.reset();
    if (k.up) { // closed mid-body (the client left, a deadline, the drain): the temporary file goes
        k.up.reset();
        cnt_.add(cnt_.uploads_failed);
    }
    k.in_len = 0;
    k.out_len = k.out_off = 0;
    release_buf(k);
    release_tls_out(k);
    k.tls.reset();
    clients_.detach(k.client);
    k.client = kNoClient;
    k.in_use = false;
    k.phase = Phase::idle;
    ++k.gen;
    free_conns_.push_back(index_of(k));
    cnt_.open.store(cnt_.open.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

uint16_t Worker::take_buf() {
    if (free_bufs_.empty()) {
        bufs_.push_back(std::make_unique<IoBuf>()); // grows to the peak of requests in flight, then reused
        return static_cast<uint16_t>(bufs_.size() - 1);
    }
    uint16_t b = free_bufs_.back();
    free_bufs_.pop_back();
    return b;
}

void Worker::release_buf(Conn& k) {
    if (k.buf == kNoBuf) return;
    free_bufs_.push_back(k.buf);
    k.buf = kNoBuf;
}

} // namespace sluice::serve
