// The ring's set-up: which flags this kernel takes (the fastest first), which opcodes it knows,
// and what is registered with it (fixed buffers, provided-buffer rings). Submission and
// completion live in ring.cpp, request preparation in ring_requests.cpp.
#include "core/ring/ring.hpp"

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
    f.op_connect = io_uring_opcode_supported(probe, IORING_OP_CONNECT);
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
    ring_mapping::made(ring_);
    sq_entries_ = p.sq_entries;
    probe_opcodes(&ring_, features_);
}

Ring::~Ring() {
    cancel_all(true);
    ring_mapping::ending(ring_);
    io_uring_queue_exit(&ring_);
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

int Ring::register_buf_ring(void* ring_addr, unsigned entries, uint16_t group) {
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uintptr_t>(ring_addr);
    reg.ring_entries = entries;
    reg.bgid = group;
    return io_uring_register_buf_ring(&ring_, &reg, 0);
}

void Ring::unregister_buf_ring(uint16_t group) noexcept { io_uring_unregister_buf_ring(&ring_, group); }

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
