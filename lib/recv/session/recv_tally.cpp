#include "recv/session/recv_tally.hpp"

#include <algorithm>

namespace sluice {

bool RecvTally::note_fallback(const std::string& why) {
    if (why.empty()) return false;
    std::lock_guard lk(mu_);
    if (std::find(fallbacks_.begin(), fallbacks_.end(), why) != fallbacks_.end()) return false;
    fallbacks_.push_back(why);
    return true;
}

void RecvTally::stream_ended(const StreamReceipt& r) {
    {
        std::lock_guard lk(mu_);
        ++streams_ended_;
        last_ended_ = std::chrono::steady_clock::now();
        blocks_ += r.blocks;
        bytes_ += r.bytes;
    }
    cv_.notify_all();
}

void RecvTally::stream_broke(const StreamReceipt& r) {
    std::lock_guard lk(mu_);
    blocks_ += r.blocks;
    bytes_ += r.bytes;
}

RecvTally::Ended RecvTally::await_streams(unsigned streams, std::chrono::milliseconds wait, const FailureLatch& latch) {
    std::unique_lock lk(mu_);
    bool all = cv_.wait_for(lk, wait, [&] { return streams_ended_ == streams || latch.stopped(); });
    return Ended{.all = all && streams_ended_ == streams, .streams = streams_ended_, .blocks = blocks_, .bytes = bytes_};
}

std::optional<std::chrono::steady_clock::time_point> RecvTally::all_ended_at(unsigned streams) const {
    std::lock_guard lk(mu_);
    if (streams_ended_ < streams) return std::nullopt;
    return last_ended_;
}

void RecvTally::wake() {
    // Taking the lock orders the latch's change before a waiter's next look at it: a waiter
    // that had just checked it is then asleep, and the notify reaches it.
    { std::lock_guard lk(mu_); }
    cv_.notify_all();
}

uint64_t RecvTally::blocks() const {
    std::lock_guard lk(mu_);
    return blocks_;
}

std::vector<std::string> RecvTally::fallbacks() const {
    std::lock_guard lk(mu_);
    return fallbacks_;
}

std::string RecvTally::marks_note(bool* gave_up) const {
    const uint64_t deadlines = marks.deadlines.load(), given_up = marks.given_up.load(), lossy = marks.unmarked_for_loss.load();
    *gave_up = given_up > 0;
    if (!deadlines && !given_up && !lossy) return {};
    return "low-water marks: " + std::to_string(lossy) + " receives unmarked after out-of-order data, " +
           std::to_string(deadlines) + " marked waits ended by their deadline, " + std::to_string(given_up) +
           " marks given up (more wake-ups per byte)";
}

} // namespace sluice
