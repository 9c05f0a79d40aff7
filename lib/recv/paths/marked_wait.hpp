#pragma once
// How a receive path waits on its data socket: a low-water mark for the bytes the sender is
// bound to send (RecvLowWater: the rest of the frame it has begun), so that TCP wakes the
// reader once per mark instead of once per few segments, and a short deadline on every marked
// wait, so that bytes below the mark are never stranded. Issue 16 (h16h) measured a receiver
// without a mark waking once per ~8 KB at 150 ms with 64 streams, 85% of its CPU.
//
// The mark never exceeds what is owed, and every wait has a deadline: where the mark is not
// met in kFallbackMs (a stream slower than a mark a second, a kernel that does not wake a
// reader at the mark, a sender that stops mid-frame without closing), the receiver takes what
// is queued and goes on, instead of sitting until the idle timeout. How large the mark may be
// is learned per stream (mark_policy.hpp): none while out-of-order data arrives (a hole is
// open on a lossy path), smaller after a deadline, none after repeated ones. An unmarked
// receive's deadline is one slice of the idle timeout (quiet_slice_ms()): a MSG_WAITALL
// receive on a slow link returns what it has each slice, credited to the transfer's pulse.
#include <linux/time_types.h>

#include <cstddef>
#include <cstdint>

#include "core/io/socket.hpp"
#include "recv/paths/mark_policy.hpp"
#include "recv/paths/stream_receiver.hpp"

namespace sluice {

class MarkedWait {
public:
    // Short beside any idle timeout (60 s; 14-22 s scaled at 20-150 ms), long beside a mark's
    // fill time at a useful rate. Where a slow stream's mark takes longer, it fires and adds
    // two receives a second per stream: measured at 150 ms with 64 streams (~0.6 MB/s each, a
    // 1 MiB mark), 250 ms made 12,300 receives per GB where no deadline made 1,400 (h16i).
    static constexpr int kFallbackMs = 1000;

    // tally: where this stream's counts go when the wait ends (nullptr: nowhere).
    MarkedWait(int sock, const RecvContext& ctx) noexcept;
    ~MarkedWait();
    MarkedWait(const MarkedWait&) = delete;
    MarkedWait& operator=(const MarkedWait&) = delete;

    struct Plan {
        bool marked;                      // a mark above 1 is set: poll first (IORING_RECVSEND_POLL_FIRST)
        bool early;                       // return with what is there: no MSG_WAITALL
        const __kernel_timespec* timeout; // the receive's link timeout: the mark's deadline or one slice
    };
    // Before a receive the sender owes `owed` bytes to (0: it may pause). Right after a
    // fallback the mark stays 1 for one receive, which then returns what is queued.
    Plan arm(size_t owed) noexcept;
    // A receive armed with plan ended by its link timeout with nothing. True: receive again (a
    // marked wait's deadline, counted, the mark dropped for the next receive; or one slice of
    // the stream's silence, which is not yet the idle timeout or is excused: StreamQuiet).
    // False: the stream went silent for the idle timeout and the transfer did not move.
    bool wait_again(const Plan& plan) noexcept;
    // A receive armed with plan returned n bytes (its evidence for the mark's cap); they are
    // credited to the transfer's pulse (credit_arrival).
    void took(const Plan& plan, size_t n) noexcept {
        policy_.received(n, plan.marked);
        quiet_.heard();
        credit_arrival(ctx_, n);
    }
    const MarkCounts& counts() const noexcept { return policy_.counts(); }

private:
    int sock_;
    const RecvContext& ctx_;
    RecvLowWater mark_;
    MarkPolicy policy_;
    StreamQuiet quiet_;
    __kernel_timespec slice_{}, fallback_{};
    bool dropped_ = false;
};

} // namespace sluice
