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

MarkedWait::MarkedWait(int sock, int idle_timeout_ms, MarkTally* tally) noexcept
    : sock_(sock), mark_(sock), tally_(tally), idle_(timespec_of(idle_timeout_ms)), fallback_(timespec_of(kFallbackMs)) {}

MarkedWait::~MarkedWait() {
    if (tally_) tally_->add(policy_.counts());
}

MarkedWait::Plan MarkedWait::arm(size_t owed) noexcept {
    const bool after_fallback = dropped_;
    dropped_ = false;
    // Below kMin no mark is set whatever the cap: no need to ask TCP about the stream.
    size_t wait_for = 0;
    if (!after_fallback && owed >= MarkPolicy::kMin) wait_for = std::min(owed, policy_.cap(out_of_order_packets(sock_)));
    const bool marked = mark_.expect(wait_for);
    // A marked wait ends at its deadline or the idle timeout, whichever is sooner.
    const __kernel_timespec* t = &idle_;
    if (marked && (fallback_.tv_sec < idle_.tv_sec || (fallback_.tv_sec == idle_.tv_sec && fallback_.tv_nsec < idle_.tv_nsec)))
        t = &fallback_;
    return {marked, marked || after_fallback, t};
}

bool MarkedWait::fell_back(const Plan& plan) noexcept {
    if (plan.timeout != &fallback_) return false;
    policy_.deadline();
    dropped_ = true;
    return true;
}

} // namespace sluice
