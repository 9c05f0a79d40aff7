#pragma once
// The receiver's running figures: counted by the data streams (atomics shared with the
// receive paths through RecvContext, and a locked record of each stream's end) and read once,
// for the end-of-transfer checks and the Stats.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/session/failure_latch.hpp"
#include "recv/paths/stream_receiver.hpp"

namespace sluice {

class RecvTally {
public:
    std::atomic<uint64_t> bytes_received{0};
    std::atomic<uint64_t> files_completed{0};
    std::atomic<uint64_t> bytes_verified_from_disk{0};
    std::atomic<uint64_t> bytes_written_direct{0};
    MarkTally marks; // the data streams' low-water marks (recv/paths/mark_policy.hpp)

    // Returns true if this slower path is new (then worth a line in the log).
    bool note_fallback(const std::string& why);
    void stream_ended(const StreamReceipt& r);
    // A connection of a stream broke and will be reopened (stream_rejoin.hpp): what it
    // delivered whole counts, the stream has not ended.
    void stream_broke(const StreamReceipt& r);

    // What the data streams reported by their STREAM_END.
    struct Ended {
        bool all = false; // every stream ended within the wait
        unsigned streams = 0;
        uint64_t blocks = 0, bytes = 0;
    };
    // Waits up to `wait` for `streams` streams to end, returning early once latch stops.
    Ended await_streams(unsigned streams, std::chrono::milliseconds wait, const FailureLatch& latch);
    // Wakes await_streams() to look at the latch again (after a failure).
    void wake();
    // When the last of `streams` data streams ended, once they all have: from then on only
    // the control connection has anything left to say.
    std::optional<std::chrono::steady_clock::time_point> all_ended_at(unsigned streams) const;

    uint64_t blocks() const;
    std::vector<std::string> fallbacks() const;
    // What the streams' low-water marks did, for -v, when they did more than wait under their
    // marks (receives unmarked for loss, waits ended by their deadline, marks given up); ""
    // otherwise. given_up: a stream gave its mark up (the slower path, for the fallbacks).
    std::string marks_note(bool* given_up) const;

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    unsigned streams_ended_ = 0;
    std::chrono::steady_clock::time_point last_ended_;
    uint64_t blocks_ = 0, bytes_ = 0;
    std::vector<std::string> fallbacks_;
};

} // namespace sluice
