#pragma once
#include <array>
#include <atomic>
#include <cstdint>

#include "sluice/export.hpp"

namespace sluice {

enum class StreamState : uint8_t { idle = 0, connecting, moving, waiting, done, failed };
SLUICE_EXPORT const char* stream_state_name(StreamState s);

// One data stream's counters.
struct StreamProgress {
    std::atomic<uint64_t> bytes{0};
    std::atomic<StreamState> state{StreamState::idle};
};

// Counters a transfer updates as it goes; any thread may read them at any time.
// Rates are the caller's to compute from two readings (bytes_done over elapsed time).
struct Progress {
    std::atomic<uint64_t> bytes_done{0};
    std::atomic<uint64_t> bytes_total{0}; // grows while the source tree is walked
    std::atomic<uint64_t> files_done{0};
    std::atomic<uint64_t> files_total{0};
    std::atomic<bool> walk_done{false};
    std::atomic<bool> is_pipe{false};          // a byte stream: no files, length known at its end
    std::atomic<unsigned> stream_count{0};     // entries of streams[] in use
    std::array<StreamProgress, 128> streams{}; // [i] is data stream i+1 (wire::kMaxStreams)
};

} // namespace sluice
