#pragma once
// The decision of `--streams auto` (stream_governor.hpp), apart from the clock and the
// sockets so that it can be tested: given the aggregate rate and retransmitted share measured
// with the current count, the next count, or the end of the search and why.
#include <algorithm>
#include <cstdint>
#include <string>

namespace sluice {

class StreamSearch {
public:
    static constexpr double kGrowth = 1.10; // a doubling must bring at least 10% more
    // A count is judged on a period whose rate grew by less than kGrowth over the one before
    // (its streams out of start-up), after at most kRampPeriods periods. Judged on the first
    // period instead, 4 BBR streams at 80 ms were still in start-up (36 Mbit/s of 96) and the
    // search went on to 16 streams that only added retransmits (11-22%, h16j).
    static constexpr unsigned kRampPeriods = 4;
    // A count whose streams' smoothed round trip stands this far above the path's lowest (a
    // queue of a fifth of the round trip at the bottleneck) ends the search there: the
    // bottleneck is full and more streams would only fill its queue and lose what overflows.
    // Measured at 80 ms on a 100 Mbit/s bottleneck without random loss (h16n): 4 BBR streams
    // moved 95 Mbit/s already, and the search on to 8 and 16 (5-12 s, unpaced so as not to
    // hold its ramp back) retransmitted 14-18% of those seconds' bytes, 3.3-5.9% of a 40 s run.
    // Random loss alone does not raise the round trip (retransmitted segments give no sample);
    // where it stood at 600 Mbit/s with 5-14% loss (2.07-2.69x, h16n C1/D1) the path was full
    // too: this emulator's delay line forwards ~420 Mbit/s (iperf3 -P 8 bbr at 0% loss), and 4
    // fixed streams moved what auto did there (350.6 against 350.2-351.9 at 5%).
    static constexpr double kQueued = 1.2;
    // A period in which the streams taking work had acknowledged less than about one initial
    // window each (10 segments) is not measured: they had no work yet, or were still waiting for
    // it. At 150 ms on a 100 Mbit/s bottleneck, 4 streams were judged on periods that moved
    // "0.0 Mbit/s" (the first blocks not yet flowing), so the search went on to 8 streams that
    // had nothing to beat, unpaced, at 17% retransmitted (h16o).
    static constexpr uint64_t kWorkBytesPerStream = 16 << 10;
    static bool had_work(uint64_t acked, unsigned streams) { return acked >= kWorkBytesPerStream * std::max(streams, 1u); }
    // Whether to measure the current count again: period `periods` (from 1) gave `rate`
    // after `before` (0 for the first).
    static bool still_ramping(double before, double rate, unsigned periods) {
        return periods < kRampPeriods && (periods == 1 || rate >= before * kGrowth);
    }
    // How far two periods of one count stood apart, over their mean: the noise a count's rate
    // carries (0 when both are 0). A count is judged on its last two periods (every count
    // gets at least two): their mean is its rate, their spread its noise. At 14% random loss
    // one period of BBR streams is noise (h16o: 4 streams 25-91 Mbit/s in the search's periods,
    // 42-252 over whole 15 s runs at 150 ms), so a doubling must beat the smaller count by
    // more than that noise, not only by kGrowth.
    static double spread(double a, double b) {
        const double mean = (a + b) / 2;
        return mean > 0 ? (a > b ? a - b : b - a) / mean : 0;
    }
    // The gain a doubling must bring over the best count: kGrowth, or more where either
    // count's periods stood further apart than that.
    static double needed_growth(double noise, double best_noise) {
        return std::max(kGrowth, 1 + std::max(noise, best_noise));
    }

    // The periods measured with one count, and what it is judged on: the mean rate of its
    // last two, how far apart those stood (spread()), and the share of the bytes sent in them
    // that were retransmitted. A count still growing by kGrowth a period when kRampPeriods
    // ran out (three rises in a row: a ramp, not noise) is judged on its last period, its
    // noise unknown (0): read as noise, 4 streams' ramp at 150 ms and 14% loss (periods 81-130%
    // apart) refused 8 streams' +58-77% and went back to 4 (h16q, where 16 fixed streams move
    // 1.8x 4's).
    class Periods {
    public:
        // One period: rate in bytes per second acknowledged, bytes sent (retransmissions
        // included) and of those retransmitted. Returns whether to measure the count again.
        bool add(double rate, uint64_t sent, uint64_t retrans) {
            before_ = rate_, rate_ = rate;
            sent_[0] = sent_[1], resent_[0] = resent_[1];
            sent_[1] = sent, resent_[1] = retrans;
            growing_ = ++n_ > 1 && rate_ >= before_ * kGrowth;
            return still_ramping(before_, rate_, n_);
        }
        unsigned count() const { return n_; }
        double rate() const { return n_ > 1 && !growing_ ? (before_ + rate_) / 2 : rate_; }
        double noise() const { return n_ > 1 && !growing_ ? spread(before_, rate_) : 0; }
        double retrans() const {
            const uint64_t both = sent_[0] + sent_[1];
            return both ? static_cast<double>(resent_[0] + resent_[1]) / static_cast<double>(both) : 0;
        }

    private:
        unsigned n_ = 0;
        bool growing_ = false; // the last period grew by kGrowth over the one before
        double before_ = 0, rate_ = 0;
        uint64_t sent_[2] = {0, 0}, resent_[2] = {0, 0};
    };

    struct Step {
        unsigned count = 0; // streams that take work from now on
        bool done = false;  // the search is over: count holds
        std::string why;    // when done
    };

    // start: the first count (at most opened); opened: the streams there are.
    StreamSearch(unsigned start, unsigned opened);
    unsigned current() const { return current_; }
    // rate: bytes per second acknowledged over all streams with current() streams (the mean
    // of its last two periods); retrans: the share of the bytes sent then that were
    // retransmissions; queued: the streams' smoothed round trip at the end over the path's
    // lowest (0: unknown); noise: spread() of those two periods (0: none known).
    Step measured(double rate, double retrans, double queued = 0, double noise = 0);
    Step measured(const Periods& p, double queued = 0) { return measured(p.rate(), p.retrans(), queued, p.noise()); }
    // Each period measured so far, for -v and the JSON ("2 streams 120.0 Mbit/s retrans 0.00%; ...").
    const std::string& steps() const { return steps_; }

private:
    unsigned current_;
    unsigned opened_;
    unsigned best_ = 0;
    double best_rate_ = 0;
    double best_retrans_ = 0;
    double best_noise_ = 0;
    std::string steps_;
};

} // namespace sluice
