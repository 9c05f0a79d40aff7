#pragma once
// One io_uring per thread. Set up with the cheapest completion mode the kernel offers
// (SINGLE_ISSUER + DEFER_TASKRUN, else COOP_TASKRUN, else plain) and probed for the
// opcodes the data paths need, so callers can say which path ran and why.
#include <liburing.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>

struct iovec;

namespace sluice {

struct RingFeatures {
    bool single_issuer = false;
    bool defer_taskrun = false;
    bool coop_taskrun = false;
    bool op_splice = false;
    bool op_send = false;
    bool op_recv = false;
    bool op_write = false;
    bool op_read = false;
    bool op_send_zc = false;
    bool op_openat = false;
    bool op_close = false;
    bool op_statx = false;
    bool op_read_fixed = false;
    bool op_write_fixed = false;
    std::string setup_mode() const; // "single_issuer+defer_taskrun", "coop_taskrun" or "plain"
};

class Ring {
public:
    explicit Ring(unsigned entries);
    ~Ring();
    Ring(const Ring&) = delete;
    Ring& operator=(const Ring&) = delete;

    // A free submission entry; flushes the queue to the kernel when it is full.
    io_uring_sqe* next_sqe();

    // Submits what is queued and reaps exactly results.size() completions, storing each
    // result at the index given by its user_data. Completions are kernel-owned state, so a
    // user_data outside the span is a bug and aborts.
    void submit_and_reap(std::span<int> results);

    // Submits what is queued without waiting.
    void submit();
    // Waits for one completion (submitting anything queued first): its user_data and result.
    std::pair<uint64_t, int> wait_one();

    struct Completion {
        uint64_t user_data;
        int res;
        unsigned flags; // IORING_CQE_F_MORE / F_NOTIF matter to SEND_ZC
    };
    // Waits for one completion, flags included.
    Completion wait_completion();

    // Registers buffers for READ_FIXED / WRITE_FIXED / SEND_ZC (index = position in bufs),
    // replacing any registered before. Returns the kernel's error (negative errno) or 0:
    // callers fall back and say so (RLIMIT_MEMLOCK, old kernels).
    int register_buffers(std::span<const iovec> bufs);

    io_uring* raw() noexcept { return &ring_; }
    const RingFeatures& features() const noexcept { return features_; }

private:
    io_uring ring_{};
    RingFeatures features_;
    bool buffers_registered_ = false;
};

// Probes once per process (without keeping a ring) what this kernel offers.
const RingFeatures& probe_ring_features();

} // namespace sluice
