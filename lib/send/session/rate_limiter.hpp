#pragma once
// A token bucket shared by all streams of a transfer: caps their total rate. Holds at most
// a quarter second of burst, so the cap shows over any interval longer than that.
//
// A data stream is silent while it waits here, and the receiver fails a transfer whose streams
// are all silent for its idle timeout: at 64 KB/s one 2 MiB block waited 32 s before a byte of
// it was sent. So a rate-limited transfer plans its blocks no larger than block_cap(): one
// block's wait, every stream queued ahead of it, is at most longest_wait() (kMaxWait, or a
// kIdleFraction of this side's idle timeout if shorter: the receiver's own is not known here,
// and a second is short beside any idle timeout but the shortest), and a wait sleeps in slices
// of at most max_sleep() (a stopped transfer is seen within one).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace sluice {

class RateLimiter {
public:
    using Clock = std::chrono::steady_clock;
    // A block's wait is at most this fraction of the idle timeout (block_cap()) ...
    static constexpr int kIdleFraction = 8;
    // ... and at most this long.
    static constexpr std::chrono::milliseconds kMaxWait{1000};
    // The smallest block the cap plans: one page. Below the rate where even it waits longer
    // (4 KiB x streams per longest_wait()) the
    // cap cannot hold; the other streams' sends still show the transfer moving. (4 KiB x 16
    // streams per second: 64 KiB/s.)
    static constexpr uint64_t kMinBlock = 4096;
    // The longest single sleep, whatever the idle timeout.
    static constexpr std::chrono::milliseconds kMaxSleep{100};

    explicit RateLimiter(uint64_t bytes_per_second, int idle_timeout_ms = 60000)
        : rate_(static_cast<double>(bytes_per_second)), idle_ms_(idle_timeout_ms) {}
    bool enabled() const { return rate_ > 0; }
    // The idle timeout the waits are bounded by (the transfer's, once its deadlines are chosen).
    void set_idle_timeout(int ms) { idle_ms_ = ms; }

    // How long a block's wait may last: kMaxWait, or a kIdleFraction of the idle timeout if shorter.
    std::chrono::duration<double> longest_wait() const {
        const std::chrono::duration<double> most = kMaxWait;
        if (idle_ms_ <= 0) return most;
        return std::min(most, std::chrono::duration<double>(idle_ms_ / 1000.0 / kIdleFraction));
    }

    // The largest block worth planning with `streams` data streams sharing the rate: each may
    // wait for every other's block before its own, and that wait stays under longest_wait(). A
    // multiple of kMinBlock, at least kMinBlock; block_size when not enabled or already smaller.
    uint64_t block_cap(uint64_t block_size, size_t streams) const {
        if (!enabled()) return block_size;
        const double fair = rate_ * longest_wait().count() / static_cast<double>(std::max<size_t>(streams, 1));
        const uint64_t cap = std::max(kMinBlock, static_cast<uint64_t>(fair) / kMinBlock * kMinBlock);
        return std::min(block_size, cap);
    }

    // The longest single sleep of acquire(): kMaxSleep, or a kIdleFraction of the idle timeout if shorter.
    Clock::duration max_sleep() const {
        if (idle_ms_ <= 0) return kMaxSleep;
        return std::min<Clock::duration>(kMaxSleep, std::chrono::milliseconds(std::max(1, idle_ms_ / kIdleFraction)));
    }

    // Takes `bytes` from the bucket at `now` and returns how long the caller must wait before
    // sending them (zero: at once). The arithmetic of acquire(), for tests.
    Clock::duration take(uint64_t bytes, Clock::time_point now) {
        std::lock_guard lk(mu_);
        if (!started_) {
            last_ = now;
            started_ = true;
        }
        const double burst = rate_ / 4;
        if (now > last_) {
            tokens_ = std::min(burst, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
            last_ = now;
        }
        tokens_ -= static_cast<double>(bytes);
        if (tokens_ >= 0) return Clock::duration::zero();
        return std::chrono::ceil<Clock::duration>(std::chrono::duration<double>(-tokens_ / rate_));
    }

    // Waits until `bytes` may be sent, in sleeps of at most max_sleep(). False if stopped()
    // became true meanwhile (the transfer failed: nothing more is sent).
    template <class Stopped> bool acquire(uint64_t bytes, Stopped&& stopped) {
        if (!enabled()) return true;
        const auto start = Clock::now();
        const auto until = start + take(bytes, start);
        const auto slice = max_sleep();
        for (auto now = Clock::now(); now < until; now = Clock::now()) {
            if (stopped()) return false;
            std::this_thread::sleep_for(std::min<Clock::duration>(until - now, slice));
        }
        return true;
    }

private:
    double rate_;
    int idle_ms_;
    std::mutex mu_;
    double tokens_ = 0;
    bool started_ = false;
    Clock::time_point last_;
};

} // namespace sluice
