#pragma once
// How often one block may fail its checksum: a block damaged on the way is asked for again;
// one that keeps failing is damaged at the source or on every path, and fails the transfer.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "sluice/error.hpp"

namespace sluice {

class ResendPolicy {
public:
    static constexpr int kMaxResends = 3;
    // Distinct blocks that may fail in one transfer: each is remembered (a map entry), and a
    // sender sending bad blocks at ever new offsets must not grow that without bound. A path
    // that damages this many blocks is not one to move data over.
    static constexpr size_t kMaxFailedBlocks = 65536;

    // Counts a failure of the block at (file id, offset); true while it may be asked for again.
    // Throws integrity once more than kMaxFailedBlocks distinct blocks have failed.
    bool may_resend(uint64_t file_id, uint64_t offset) {
        std::lock_guard lk(mu_);
        ++failures_;
        if (times_.size() >= kMaxFailedBlocks && !times_.contains({file_id, offset}))
            throw Error(ErrorCode::integrity, "more than " + std::to_string(kMaxFailedBlocks) +
                                                  " blocks failed their checksum in this transfer: the path damages data");
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
