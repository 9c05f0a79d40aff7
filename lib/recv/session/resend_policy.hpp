#pragma once
// How often one block may fail its checksum: a block damaged on the way is asked for again;
// one that keeps failing is damaged at the source or on every path, and fails the transfer.
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace sluice {

class ResendPolicy {
public:
    static constexpr int kMaxResends = 3;

    // Counts a failure of the block at (file id, offset); true while it may be asked for again.
    bool may_resend(uint64_t file_id, uint64_t offset) {
        std::lock_guard lk(mu_);
        ++failures_;
        return ++times_[{file_id, offset}] <= kMaxResends;
    }
    uint64_t failures() const {
        std::lock_guard lk(mu_);
        return failures_;
    }

private:
    mutable std::mutex mu_;
    std::map<std::pair<uint64_t, uint64_t>, int> times_; // (file id, offset) -> failures
    uint64_t failures_ = 0;
};

} // namespace sluice
