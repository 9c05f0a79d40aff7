#pragma once
// A token bucket shared by all streams of a transfer: caps their total rate. Holds at most
// a quarter second of burst, so the cap shows over any interval longer than that.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

namespace sluice {

class RateLimiter {
public:
    explicit RateLimiter(uint64_t bytes_per_second) : rate_(static_cast<double>(bytes_per_second)) {}
    bool enabled() const { return rate_ > 0; }

    void acquire(uint64_t bytes) {
        if (!enabled()) return;
        std::chrono::duration<double> wait{};
        {
            std::lock_guard lk(mu_);
            auto now = std::chrono::steady_clock::now();
            if (!started_) {
                last_ = now;
                started_ = true;
            }
            double burst = rate_ / 4;
            tokens_ = std::min(burst, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
            last_ = now;
            tokens_ -= static_cast<double>(bytes);
            if (tokens_ < 0) wait = std::chrono::duration<double>(-tokens_ / rate_);
        }
        if (wait.count() > 0) std::this_thread::sleep_for(wait);
    }

private:
    double rate_;
    std::mutex mu_;
    double tokens_ = 0;
    bool started_ = false;
    std::chrono::steady_clock::time_point last_;
};

} // namespace sluice
