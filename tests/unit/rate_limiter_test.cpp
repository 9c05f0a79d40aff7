// The rate limiter's arithmetic (send/session/rate_limiter.hpp), on a clock the test moves:
// the rate it keeps over many blocks, the burst it allows, and how small it has blocks planned
// so that no stream waits for its turn past a fraction of the idle timeout. Nothing here sleeps.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "send/session/rate_limiter.hpp"

using sluice::RateLimiter;
using namespace std::chrono_literals;
using Clock = RateLimiter::Clock;

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// `streams` streams take `block` bytes each in turn, each sending when its wait ends (a
// stream's next take comes at its previous send). Returns the rate kept from the first take to
// the last send, and the longest wait any take was given.
struct Run {
    double rate;
    Clock::duration longest;
};
Run drive(RateLimiter& l, uint64_t block, int streams, int rounds) {
    const auto t0 = Clock::now();
    std::vector<Clock::time_point> ready(static_cast<size_t>(streams), t0);
    Clock::duration longest{};
    Clock::time_point end = t0;
    uint64_t bytes = 0;
    for (int r = 0; r < rounds; ++r)
        for (auto& at : ready) {
            const auto wait = l.take(block, at);
            longest = std::max(longest, wait);
            at += wait;
            end = std::max(end, at);
            bytes += block;
        }
    return {static_cast<double>(bytes) / seconds(end - t0), longest};
}

} // namespace

TEST_CASE("the rate kept over many blocks is the rate asked, within the quarter second of burst") {
    for (uint64_t rate : {uint64_t{8} << 10, uint64_t{64} << 10, uint64_t{140} << 10, uint64_t{100} << 20}) {
        RateLimiter l(rate, 60000);
        const uint64_t block = l.block_cap(8 << 20, 4);
        const Run run = drive(l, block, 4, 200);
        // Over the whole run the first quarter second of burst (none: the bucket starts empty)
        // and rounding add at most a hair.
        CHECK(run.rate <= static_cast<double>(rate) * 1.001);
        CHECK(run.rate >= static_cast<double>(rate) * 0.99);
    }
}

TEST_CASE("no take waits longer than a second or the idle timeout's fraction when blocks follow block_cap") {
    for (int idle_ms : {2000, 60000}) {
        for (uint64_t rate : {uint64_t{64} << 10, uint64_t{140} << 10, uint64_t{1} << 20}) {
            for (int streams : {1, 4, 16}) {
                RateLimiter l(rate, idle_ms);
                const uint64_t block = l.block_cap(2 << 20, static_cast<size_t>(streams));
                CAPTURE(idle_ms);
                CAPTURE(rate);
                CAPTURE(streams);
                CAPTURE(block);
                CHECK(block % RateLimiter::kMinBlock == 0);
                const Run run = drive(l, block, streams, 20);
                // Below a page per stream per longest wait the floor holds instead (the documented limit).
                const double most = std::min(1.0, idle_ms / 1000.0 / RateLimiter::kIdleFraction);
                CHECK(l.longest_wait().count() == doctest::Approx(most));
                const double fair = static_cast<double>(rate) * most / streams;
                const double bound = fair >= RateLimiter::kMinBlock
                                         ? most
                                         : static_cast<double>(streams) * RateLimiter::kMinBlock / static_cast<double>(rate);
                CHECK(seconds(run.longest) <= bound + 0.001);
            }
        }
    }
}

TEST_CASE("the old way: one 2 MiB block at 64 KB/s waited half a minute") {
    RateLimiter l(64 << 10, 2000);
    const auto t0 = Clock::now();
    CHECK(seconds(l.take(2 << 20, t0)) == doctest::Approx(32.0).epsilon(0.01));
    // The cap plans blocks of 16 KiB for one stream at a 2 s idle timeout: 0.25 s each.
    CHECK(l.block_cap(2 << 20, 1) == 16 << 10);
}

TEST_CASE("an idle bucket fills to a quarter second of burst, no more") {
    RateLimiter l(1 << 20, 60000);
    const auto t0 = Clock::now();
    CHECK(l.take(0, t0) == Clock::duration::zero());
    // An hour idle: still only a quarter second's bytes go at once.
    CHECK(l.take((1 << 20) / 4, t0 + 3600s) == Clock::duration::zero());
    CHECK(seconds(l.take(1 << 20, t0 + 3600s)) == doctest::Approx(1.0).epsilon(0.001));
}

TEST_CASE("a time earlier than the last take (another thread's clock read) neither adds nor removes tokens") {
    RateLimiter l(1 << 20, 60000);
    const auto t0 = Clock::now();
    l.take(0, t0);
    l.take(0, t0 + 1s); // the bucket holds its quarter second
    CHECK(seconds(l.take(1 << 20, t0)) == doctest::Approx(0.75).epsilon(0.001));
}

TEST_CASE("block_cap: off without a rate, never above the block size, never below a page") {
    CHECK(RateLimiter(0, 2000).block_cap(8 << 20, 16) == 8 << 20);
    CHECK(RateLimiter(200 << 20, 60000).block_cap(8 << 20, 16) == 8 << 20);
    CHECK(RateLimiter(100 << 20, 60000).block_cap(8 << 20, 16) == 6400 << 10); // 100 MiB/s over 16 streams: a second each
    CHECK(RateLimiter(1000, 2000).block_cap(8 << 20, 16) == RateLimiter::kMinBlock);
}

TEST_CASE("no single sleep is longer than 100 ms or an eighth of the idle timeout") {
    CHECK(RateLimiter(1000, 60000).max_sleep() == RateLimiter::kMaxSleep);
    CHECK(RateLimiter(1000, 400).max_sleep() == std::chrono::milliseconds(50));
}
