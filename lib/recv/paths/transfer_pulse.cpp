// When the transfer last moved, for the data streams' idle timers (transfer_pulse.hpp).
#include "recv/paths/transfer_pulse.hpp"

namespace sluice {

TransferPulse::TransferPulse(const std::atomic<uint64_t>& bytes, const std::atomic<uint64_t>& files) noexcept
    : bytes_(bytes), files_(files), seen_(bytes.load() + files.load()), moved_at_(Clock::now().time_since_epoch().count()) {}

void TransferPulse::moved(Clock::time_point now) noexcept {
    // Two threads may date a movement at once: the later time wins, never an earlier one.
    const auto t = now.time_since_epoch().count();
    auto at = moved_at_.load();
    while (at < t && !moved_at_.compare_exchange_weak(at, t)) {
    }
}

void TransferPulse::look(Clock::time_point now) noexcept {
    const uint64_t total = bytes_.load(std::memory_order_relaxed) + files_.load(std::memory_order_relaxed) +
                           arrived_.load(std::memory_order_relaxed);
    uint64_t seen = seen_.load();
    bool raised = false;
    while (total > seen && !(raised = seen_.compare_exchange_weak(seen, total))) {
    }
    if (raised) moved(now);
}

bool TransferPulse::excuses(int idle_timeout_ms, Clock::time_point now) noexcept {
    if (working_.load()) return true;
    look(now);
    return now - Clock::time_point(Clock::duration(moved_at_.load())) < std::chrono::milliseconds(idle_timeout_ms);
}

} // namespace sluice
