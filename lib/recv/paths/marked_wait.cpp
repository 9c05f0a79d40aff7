// A receive under a low-water mark, with its deadline (marked_wait.hpp).
#include "recv/paths/marked_wait.hpp"

#include <algorithm>

namespace sluice {

namespace {

__kernel_timespec timespec_of(int ms) noexcept {
    __kernel_timespec t{};
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1'000'000LL;
    return t;
}

} // namespace

MarkedWait::MarkedWait(int sock, const RecvContext& ctx) noexcept
    : sock_(sock), ctx_(ctx), mark_(sock), slice_(timespec_of(quiet_slice_ms(ctx.idle_timeout_ms))),
      fallback_(timespec_of(kFallbackMs)) {}

MarkedWait::~MarkedWait() {
    if (ctx_.marks) ctx_.marks->add(policy_.counts());
}

MarkedWait::Plan MarkedWait::arm(size_t owed) noexcept {
    const bool after_fallback = dropped_;
    dropped_ = false;
    // Below kMin no mark is set whatever the cap: no need to ask TCP about the stream.
    size_t wait_for = 0;
    if (!after_fallback && owed >= MarkPolicy::kMin) wait_for = std::min(owed, policy_.cap(out_of_order_packets(sock_)));
    const bool marked = mark_.expect(wait_for);
    // A marked wait ends at its deadline or one slice, whichever is sooner; any other at one slice.
    const __kernel_timespec* t = &slice_;
    if (marked && (fallback_.tv_sec < slice_.tv_sec || (fallback_.tv_sec == slice_.tv_sec && fallback_.tv_nsec < slice_.tv_nsec)))
        t = &fallback_;
    return {marked, marked || after_fallback, t};
}

bool MarkedWait::wait_again(const Plan& plan) noexcept {
    // A marked wait that ended with nothing may have bytes below its mark: its deadline, not
    // the stream's silence (the next receive, unmarked, takes them or counts a slice).
    if (plan.marked) {
        policy_.deadline();
        dropped_ = true;
        return true;
    }
    return quiet_.wait_again(ctx_);
}

} // namespace sluice
