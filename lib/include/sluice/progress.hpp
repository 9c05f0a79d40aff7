#pragma once
#include <atomic>
#include <cstdint>

namespace sluice {

// Counters a transfer updates as it goes; any thread may read them at any time.
struct Progress {
    std::atomic<uint64_t> bytes_done{0};
    std::atomic<uint64_t> bytes_total{0};  // grows while the source tree is walked
    std::atomic<uint64_t> files_done{0};
    std::atomic<uint64_t> files_total{0};
    std::atomic<bool> walk_done{false};
};

} // namespace sluice
