#pragma once
// The sender's announce window (issue 19, docs/protocol.md "Announce window"): at most
// `limit` regular files announced in the manifest and not yet complete at the receiver. The
// walk waits for room; the receiver's FILES_DONE makes it. Without the window the whole
// manifest goes out as fast as the tree is walked and the receiver holds every entry at once.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

namespace sluice {

class AnnounceWindow {
public:
    using Clock = std::chrono::steady_clock;

    // Before the walk. 0: no window (a receiver without the feature); files are counted all
    // the same.
    void set_limit(uint64_t limit) { limit_ = limit; }
    uint64_t limit() const { return limit_; }
    // Walk thread, before announcing one more file: true if that has to wait for room.
    bool full() const;
    // Walk thread, before announcing a file: if the window is full, `flush()` (the page so
    // far: the receiver can finish only what it has) and wait until there is room or
    // `stopped()` says the transfer ended (checked whenever stop() wakes us, and every 100 ms).
    // Then counts the file as announced.
    void admit(const std::function<void()>& flush, const std::function<bool()>& stopped);
    // Control reader: FILES_DONE. Throws protocol Error for a count that goes back or passes
    // the files announced.
    void done(uint64_t files);
    // Wakes a waiting walk (the transfer stopped).
    void stop();

    // Since when the walk has waited with the window full; nullopt while it does not.
    std::optional<Clock::time_point> waiting_since() const;
    // The most files that were announced and not complete at once.
    uint64_t peak() const;

private:
    uint64_t limit_ = 0;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    uint64_t announced_ = 0;
    uint64_t done_ = 0;
    uint64_t peak_ = 0;
    std::optional<Clock::time_point> waiting_since_;
};

} // namespace sluice
