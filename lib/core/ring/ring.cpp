#include "core/ring/ring.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/uio.h>

#include "core/io/sys_error.hpp"

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
    io_uring_free_probe(probe);
}

} // namespace

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
    probe_opcodes(&ring_, features_);
}

Ring::~Ring() { io_uring_queue_exit(&ring_); }

io_uring_sqe* Ring::next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {
        int rc = io_uring_submit(&ring_);
        if (rc < 0) throw_errno(ErrorCode::internal, "io_uring_submit", -rc);
        sqe = io_uring_get_sqe(&ring_);
        if (!sqe) throw Error(ErrorCode::internal, "io_uring: no submission entry free after submit");
    }
    return sqe;
}

void Ring::submit_and_reap(std::span<int> results) {
    size_t left = results.size();
    int rc;
    do {
        rc = io_uring_submit_and_wait(&ring_, static_cast<unsigned>(left ? 1 : 0));
    } while (rc == -EINTR);
    if (rc < 0) throw_errno(ErrorCode::internal, "io_uring_submit_and_wait", -rc);
    while (left > 0) {
        io_uring_cqe* cqe = nullptr;
        rc = io_uring_wait_cqe(&ring_, &cqe);
        if (rc == -EINTR) continue;
        if (rc < 0) throw_errno(ErrorCode::internal, "io_uring_wait_cqe", -rc);
        uint64_t idx = cqe->user_data;
        if (idx >= results.size()) std::abort();
        results[idx] = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        --left;
    }
}

void Ring::submit() {
    int rc = io_uring_submit(&ring_);
    if (rc < 0) throw_errno(ErrorCode::internal, "io_uring_submit", -rc);
}

std::pair<uint64_t, int> Ring::wait_one() {
    Completion c = wait_completion();
    return {c.user_data, c.res};
}

Ring::Completion Ring::wait_completion() {
    io_uring_cqe* cqe = nullptr;
    int rc;
    do {
        rc = io_uring_wait_cqe(&ring_, &cqe);
    } while (rc == -EINTR);
    if (rc < 0) throw_errno(ErrorCode::internal, "io_uring_wait_cqe", -rc);
    Completion out{cqe->user_data, cqe->res, cqe->flags};
    io_uring_cqe_seen(&ring_, cqe);
    return out;
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
