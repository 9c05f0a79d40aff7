// Preparing requests: each takes a submission entry for its Completion (linked into what is in
// flight) and fills it for one opcode; chains and their link timeouts are built here too.
#include "core/ring/ring.hpp"

#include <string>

#include "sluice/error.hpp"

namespace sluice {

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

void Ring::connect(Completion& c, int fd, const sockaddr* addr, unsigned addr_len) {
    io_uring_sqe* sqe = take_sqe(c, IORING_OP_CONNECT);
    io_uring_prep_connect(sqe, fd, addr, addr_len);
    io_uring_sqe_set_data(sqe, &c);
}

void Ring::cancel(Completion& c) {
    if (c.ring_ != this) return; // nothing in flight
    queue_cancel(reinterpret_cast<uintptr_t>(&c), 0);
}

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

} // namespace sluice
