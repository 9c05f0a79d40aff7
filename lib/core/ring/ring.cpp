// Submission, completion and cancellation: the one place a CQE becomes an outcome for its
// Completion, and the waits. Set-up is in ring_setup.cpp, request preparation in ring_requests.cpp.
#include "core/ring/ring.hpp"

#include <cerrno>
#include <cstdlib>

#include "core/io/sys_error.hpp"

namespace sluice {

namespace {

// The one place a CQE's result becomes a decision. EAGAIN means "try again" only where the
// kernel can return it for a request it did not finish: sockets and pipes. For a file
// write it would be a bug of ours (no RWF_NOWAIT), so it stays an error.
Completion::Outcome classify(uint8_t op, int res) {
    using O = Completion::Outcome;
    if (res >= 0) return O::ok;
    if (op == IORING_OP_LINK_TIMEOUT) return res == -ETIME ? O::ok : O::cancelled; // ok: it fired
    if (res == -ECANCELED) return O::cancelled;
    if (res == -EINTR) return O::retry;
    if (res == -EAGAIN && op != IORING_OP_WRITE && op != IORING_OP_WRITE_FIXED) return O::retry;
    return O::failed;
}

// user_data of the ring's own requests (cancellation): no Completion behind them.
constexpr uint64_t kInternal = 0;

} // namespace

Completion::~Completion() {
    // The memory this request points to may go next: nothing of the ring may still use it.
    if (ring_) ring_->cancel_all(false);
}

bool Ring::completions_waiting() {
    if (io_uring_cq_ready(&ring_) > 0) return true;
    if (features_.defer_taskrun) io_uring_get_events(&ring_); // an error here only means "none yet"
    return io_uring_cq_ready(&ring_) > 0;
}

void Ring::cancel_all(bool ring_ending) noexcept {
    // SEND_ZC notifications cannot be cancelled: they come when the peer has taken the data,
    // which may be never. A ring that ends writes them off (the kernel holds its own reference
    // on those pages, and no CQE can name a completion once the ring is gone); a ring that
    // lives on must see them, or a late one would name a completion that no longer exists.
    auto must_wait = [&] { return ring_ending ? owed_ > notifs_owed_ : owed_ > 0; };
    // Whatever is queued but not submitted goes in too, and is cancelled like the rest (the
    // kernel cannot be asked to forget an SQE it has not seen).
    if (owed_ > notifs_owed_) queue_cancel(0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
    while (must_wait()) {
        if (cancel_any_refused_) {
            // Before Linux 5.19: one cancellation per request, by its user_data.
            cancel_any_refused_ = false;
            for (Completion* c = in_flight_; c; c = c->next_) queue_cancel(reinterpret_cast<uintptr_t>(c), 0);
        }
        int rc = io_uring_submit_and_wait(&ring_, 1);
        if (rc < 0 && rc != -EINTR && rc != -EBUSY) std::abort(); // the ring itself is broken: nothing proves memory is free
        io_uring_cqe* cqe = nullptr;
        while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
            Completion* c = nullptr;
            complete(cqe, c);
        }
    }
    while (in_flight_) {
        Completion* c = in_flight_;
        c->res_ = -ECANCELED;
        c->outcome_ = Completion::Outcome::cancelled;
        unlink(*c);
    }
    owed_ = notifs_owed_ = 0;
}

void Ring::queue_cancel(uint64_t user_data, unsigned flags) noexcept {
    if (io_uring_sq_space_left(&ring_) == 0) io_uring_submit(&ring_);
    if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) {
        io_uring_prep_cancel64(sqe, user_data, static_cast<int>(flags));
        io_uring_sqe_set_data64(sqe, kInternal);
    }
}

void Ring::unlink(Completion& c) noexcept {
    if (c.prev_)
        c.prev_->next_ = c.next_;
    else
        in_flight_ = c.next_;
    if (c.next_) c.next_->prev_ = c.prev_;
    c.prev_ = c.next_ = nullptr;
    c.ring_ = nullptr;
}

void Ring::submit() {
    int rc;
    do {
        rc = io_uring_submit(&ring_);
    } while (rc == -EINTR);
    if (rc < 0) throw_errno(ErrorCode::internal, "io_uring_submit", -rc);
}

void Ring::complete(io_uring_cqe* cqe, Completion*& out) {
    const uint64_t ud = cqe->user_data;
    const int res = cqe->res;
    const uint32_t flags = cqe->flags;
    io_uring_cqe_seen(&ring_, cqe);
    if (ud == kInternal) {
        if (res == -EINVAL) cancel_any_refused_ = true;
        return;
    }
    Completion& c = *reinterpret_cast<Completion*>(static_cast<uintptr_t>(ud));
    if (c.ring_ != this) std::abort(); // a CQE for nothing in flight: the ring's state is corrupt
    c.flags_ = flags;
    const bool notif = flags & IORING_CQE_F_NOTIF;
    if (notif) {
        --notifs_owed_;
        c.res_ = res; // the notification's own word (ZC_COPIED); the send's result is already known
        c.outcome_ = Completion::Outcome::ok;
    } else {
        c.res_ = res;
        c.outcome_ = classify(c.op_, res);
    }
    // A SEND_ZC cancelled while it waited for socket room (a cancellation, a link timeout)
    // completes with -ECANCELED and no F_MORE, yet the kernel still posts its notification
    // when it frees the request (seen on 6.18): count it as owed, or that notification would
    // name a completion no longer in flight.
    const bool zc_cancelled = !notif && c.op_ == IORING_OP_SEND_ZC && res == -ECANCELED;
    if ((flags & IORING_CQE_F_MORE) || zc_cancelled) {
        // SEND_ZC: the same request owes its notification. A multishot request (accept,
        // recv) with F_MORE simply stays armed: its last CQE comes without F_MORE.
        if (c.op_ == IORING_OP_SEND_ZC) ++notifs_owed_;
    } else {
        --owed_;
        unlink(c);
    }
    out = &c;
}

Completion& Ring::wait() {
    for (;;) {
        io_uring_cqe* cqe = nullptr;
        if (io_uring_peek_cqe(&ring_, &cqe) != 0) {
            // One system call submits what is queued and waits. While CQEs are at hand, what is
            // queued meanwhile waits for the next such call: a batch of refills, not one each.
            int rc = io_uring_submit_and_wait(&ring_, 1);
            if (rc < 0 && rc != -EINTR) throw_errno(ErrorCode::internal, "io_uring_submit_and_wait", -rc);
            continue;
        }
        Completion* c = nullptr;
        complete(cqe, c);
        if (c) return *c;
    }
}

Completion* Ring::wait_for(int timeout_ms) {
    __kernel_timespec ts{};
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = (timeout_ms % 1000) * 1'000'000LL;
    for (;;) {
        io_uring_cqe* cqe = nullptr;
        if (io_uring_peek_cqe(&ring_, &cqe) != 0) {
            // The timeout is the whole wait, not per retry: a signal storm cannot stretch it much
            // (EINTR is rare here, and a retry only adds one more timeout).
            int rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
            if (rc == -ETIME) return nullptr;
            if (rc < 0 && rc != -EINTR) throw_errno(ErrorCode::internal, "io_uring_submit_and_wait_timeout", -rc);
            continue;
        }
        Completion* c = nullptr;
        complete(cqe, c);
        if (c) return c;
    }
}

} // namespace sluice
