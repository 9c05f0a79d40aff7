#include "core/ring/ring.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/uio.h>

#include "core/io/sys_error.hpp"
#include "core/ring/mapping_order.hpp"

namespace sluice {

std::string RingFeatures::setup_mode() const {
    if (single_issuer && defer_taskrun) return "single_issuer+defer_taskrun";
    if (coop_taskrun) return "coop_taskrun";
    return "plain";
}

namespace {

void probe_opcodes(io_uring* ring, RingFeatures& f) {
    io_uring_probe* probe = io_uring_get_probe_ring(ring);
    if (!probe) return;
    f.op_splice = io_uring_opcode_supported(probe, IORING_OP_SPLICE);
    f.op_send = io_uring_opcode_supported(probe, IORING_OP_SEND);
    f.op_recv = io_uring_opcode_supported(probe, IORING_OP_RECV);
    f.op_write = io_uring_opcode_supported(probe, IORING_OP_WRITE);
    f.op_read = io_uring_opcode_supported(probe, IORING_OP_READ);
    f.op_send_zc = io_uring_opcode_supported(probe, IORING_OP_SEND_ZC);
    f.op_openat = io_uring_opcode_supported(probe, IORING_OP_OPENAT);
    f.op_close = io_uring_opcode_supported(probe, IORING_OP_CLOSE);
    f.op_statx = io_uring_opcode_supported(probe, IORING_OP_STATX);
    f.op_read_fixed = io_uring_opcode_supported(probe, IORING_OP_READ_FIXED);
    f.op_write_fixed = io_uring_opcode_supported(probe, IORING_OP_WRITE_FIXED);
    f.op_accept = io_uring_opcode_supported(probe, IORING_OP_ACCEPT);
    f.op_poll = io_uring_opcode_supported(probe, IORING_OP_POLL_ADD);
    io_uring_free_probe(probe);
}

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

Ring::Ring(unsigned entries) {
    io_uring_params p{};
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
    p.cq_entries = entries * 4;
    int rc = io_uring_queue_init_params(entries, &ring_, &p);
    if (rc == 0) {
        features_.single_issuer = features_.defer_taskrun = true;
    } else {
        p = io_uring_params{};
        p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_CQSIZE;
        p.cq_entries = entries * 4;
        rc = io_uring_queue_init_params(entries, &ring_, &p);
        if (rc == 0) {
            features_.coop_taskrun = true;
        } else {
            p = io_uring_params{};
            rc = io_uring_queue_init_params(entries, &ring_, &p);
        }
    }
    if (rc < 0) throw_errno(ErrorCode::internal, "io_uring_setup", -rc);
    ring_mapping::made(ring_);
    sq_entries_ = p.sq_entries;
    probe_opcodes(&ring_, features_);
}

Ring::~Ring() {
    cancel_all(true);
    ring_mapping::ending(ring_);
    io_uring_queue_exit(&ring_);
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

io_uring_sqe* Ring::take_sqe(Completion& c, uint8_t op) {
    if (c.ring_) throw Error(ErrorCode::internal, "io_uring: a request queued on a completion still in flight");
    io_uring_sqe* sqe;
    if (chain_open_) {
        if (chain_left_ == 0) throw Error(ErrorCode::internal, "io_uring: a chain grew past the entries it reserved");
        --chain_left_;
        sqe = io_uring_get_sqe(&ring_);
        if (!sqe) std::abort(); // reserved by chain(): cannot happen
        if (chain_last_) chain_last_->flags |= IOSQE_IO_LINK;
        chain_last_ = sqe;
    } else {
        sqe = io_uring_get_sqe(&ring_);
        if (!sqe) {
            submit();
            sqe = io_uring_get_sqe(&ring_);
            if (!sqe) throw Error(ErrorCode::internal, "io_uring: no submission entry free after submit");
        }
    }
    c.ring_ = this;
    c.op_ = op;
    c.flags_ = 0;
    c.res_ = 0;
    c.prev_ = nullptr;
    c.next_ = in_flight_;
    if (in_flight_) in_flight_->prev_ = &c;
    in_flight_ = &c;
    ++owed_;
    return sqe;
}

void Ring::recv(Completion& c, int fd, void* buf, size_t len, int msg_flags, bool poll_first) {
    io_uring_sqe* sqe = take_sqe(c, IORING_OP_RECV);
    io_uring_prep_recv(sqe, fd, buf, len, msg_flags);
    if (poll_first) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::send(Completion& c, int fd, const void* buf, size_t len, int msg_flags) {
    io_uring_sqe* sqe = take_sqe(c, IORING_OP_SEND);
    io_uring_prep_send(sqe, fd, buf, len, msg_flags);
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::send_zc(Completion& c, int fd, const void* buf, size_t len, int msg_flags, unsigned zc_flags, int buf_index) {
    io_uring_sqe* sqe = take_sqe(c, IORING_OP_SEND_ZC);
    if (buf_index >= 0)
        io_uring_prep_send_zc_fixed(sqe, fd, buf, len, msg_flags, zc_flags, static_cast<unsigned>(buf_index));
    else
        io_uring_prep_send_zc(sqe, fd, buf, len, msg_flags, zc_flags);
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::read(Completion& c, int fd, void* buf, unsigned len, uint64_t offset, int buf_index) {
    io_uring_sqe* sqe = take_sqe(c, buf_index >= 0 ? IORING_OP_READ_FIXED : IORING_OP_READ);
    if (buf_index >= 0)
        io_uring_prep_read_fixed(sqe, fd, buf, len, offset, buf_index);
    else
        io_uring_prep_read(sqe, fd, buf, len, offset);
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::write(Completion& c, int fd, const void* buf, unsigned len, uint64_t offset, int buf_index) {
    io_uring_sqe* sqe = take_sqe(c, buf_index >= 0 ? IORING_OP_WRITE_FIXED : IORING_OP_WRITE);
    if (buf_index >= 0)
        io_uring_prep_write_fixed(sqe, fd, buf, len, offset, buf_index);
    else
        io_uring_prep_write(sqe, fd, buf, len, offset);
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::splice(Completion& c, int fd_in, int64_t off_in, int fd_out, int64_t off_out, unsigned len, unsigned flags) {
    io_uring_sqe* sqe = take_sqe(c, IORING_OP_SPLICE);
    io_uring_prep_splice(sqe, fd_in, off_in, fd_out, off_out, len, flags);
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::accept(Completion& c, int fd, int flags, bool multishot) {
    io_uring_sqe* sqe = take_sqe(c, IORING_OP_ACCEPT);
    if (multishot)
        io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, flags);
    else
        io_uring_prep_accept(sqe, fd, nullptr, nullptr, flags);
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::recv_provided(Completion& c, int fd, uint16_t group, bool multishot) {
    io_uring_sqe* sqe = take_sqe(c, IORING_OP_RECV);
    if (multishot)
        io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
    else
        io_uring_prep_recv(sqe, fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = group;
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::poll(Completion& c, int fd, unsigned events) {
    io_uring_sqe* sqe = take_sqe(c, IORING_OP_POLL_ADD);
    io_uring_prep_poll_add(sqe, fd, events);
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::cancel(Completion& c) {
    if (c.ring_ != this) return; // nothing in flight
    queue_cancel(reinterpret_cast<uintptr_t>(&c), 0);
}

int Ring::register_buf_ring(void* ring_addr, unsigned entries, uint16_t group) {
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uintptr_t>(ring_addr);
    reg.ring_entries = entries;
    reg.bgid = group;
    return io_uring_register_buf_ring(&ring_, &reg, 0);
}

void Ring::unregister_buf_ring(uint16_t group) noexcept { io_uring_unregister_buf_ring(&ring_, group); }

void Ring::link_timeout(Completion& c, const __kernel_timespec& ts) {
    if (!chain_open_ || !chain_last_) throw Error(ErrorCode::internal, "io_uring: a link timeout outside a chain bounds nothing");
    io_uring_sqe* sqe = take_sqe(c, IORING_OP_LINK_TIMEOUT);
    // The kernel reads ts when the request is submitted, not later.
    io_uring_prep_link_timeout(sqe, const_cast<__kernel_timespec*>(&ts), 0);
    io_uring_sqe_set_data(sqe, &c);
}

Ring::Chain Ring::chain(unsigned max_requests) {
    if (chain_open_) throw Error(ErrorCode::internal, "io_uring: chains do not nest");
    if (max_requests > sq_entries_)
        throw Error(ErrorCode::internal, "io_uring: a chain of " + std::to_string(max_requests) +
                                             " requests does not fit a ring of " + std::to_string(sq_entries_));
    // Submitting what is queued is safe here: no chain is half-built.
    if (io_uring_sq_space_left(&ring_) < max_requests) submit();
    if (io_uring_sq_space_left(&ring_) < max_requests)
        throw Error(ErrorCode::internal, "io_uring: submission queue still full after submit");
    chain_open_ = true;
    chain_left_ = max_requests;
    chain_last_ = nullptr;
    return Chain(*this);
}

Ring::Chain::~Chain() {
    // The last request links to nothing: the next chain is not bound to this one.
    ring_.chain_open_ = false;
    ring_.chain_left_ = 0;
    ring_.chain_last_ = nullptr;
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

int Ring::register_buffers(std::span<const iovec> bufs) {
    if (buffers_registered_) {
        io_uring_unregister_buffers(&ring_);
        buffers_registered_ = false;
    }
    int rc = io_uring_register_buffers(&ring_, bufs.data(), static_cast<unsigned>(bufs.size()));
    buffers_registered_ = rc == 0;
    return rc;
}

const RingFeatures& probe_ring_features() {
    static const RingFeatures features = [] {
        try {
            Ring r(4);
            return r.features();
        } catch (const Error&) {
            return RingFeatures{};
        }
    }();
    return features;
}

} // namespace sluice
