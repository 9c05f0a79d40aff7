#pragma once
// Pacing a transfer's data streams together (issue 16): many streams on one bottleneck each
// probe for more bandwidth on their own (BBR's 1.25x probing phases, CUBIC's growth), so the
// sum of their sending rates overshoots the path and they lose packets to each other, not to
// the path. The pacer measures the aggregate rate the receiver's TCP received (all
// streams) and, once the aggregate stops growing (the pipe is full), caps each stream's
// pacing rate (SO_MAX_PACING_RATE) at its share of the best aggregate seen recently times a
// gain that cycles as BBR's does for one flow (one round at 1.25 to probe, one at 0.75 to
// drain the queue the probe made, six cruising): the streams together probe like one flow,
// not like N. A fixed headroom does not work: measured at 100 Mbit/s, 8 streams capped at
// 1.1x their share kept the bottleneck queue full and lost the 10% excess (11.8% retransmitted).
// Before the pipe is full nothing is capped: capping slow start would slow the ramp-up.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice {

// The pacer's decision, apart from sockets and clocks (unit-tested): fed one sample per round
// (the aggregate delivered rate and how many streams moved data), it says each stream's cap.
class PaceModel {
public:
    // The cap's gain over the best aggregate, one entry per round (per stream: gain times
    // best / the streams moving), as BBR's ProbeBW cycle, cruising at 0.95. The aggregate is
    // what the streams' peers received (bytes_delivered(): acknowledged or SACKed), so the best
    // is near the bottleneck's rate: measured from bytes_acked instead, which leaps when a loss
    // is repaired, the one-round maximum sat 10-20% above it and the caps summed to 98-108
    // Mbit/s on a 96 Mbit/s path (h16c, 9.8% retransmitted; h16g). Cruising at 0.95 of an
    // accurate best averages (1.25 + 0.75 + 6 x 0.95) / 8 = 0.96 of the path over a cycle; a
    // probe round adds a quarter of a round's bytes to the bottleneck's queue, the drain
    // round takes it out.
    static constexpr double kGains[8] = {1.25, 0.75, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95};
    // The pipe is full once the aggregate grew by less than kGrowth for kFlatRounds rounds.
    static constexpr double kGrowth = 1.25;
    static constexpr unsigned kFlatRounds = 3;
    // The best aggregate is the maximum over this many rounds (a loss burst does not pull
    // the cap down; a path that got slower lowers it within this many rounds).
    static constexpr unsigned kWindowRounds = 10;

    // 0: not capped (the pipe is not full yet); else bytes per second per moving stream.
    uint64_t round(double rate, unsigned moving);
    bool full() const { return full_; }

private:
    std::deque<double> window_; // aggregate rate of the last kWindowRounds rounds
    double plateau_ = 0;        // the rate the growth test compares with
    unsigned flat_ = 0, phase_ = 0;
    bool full_ = false;
};

class StreamPacer {
public:
    // Below this round trip the pacer leaves the streams alone: on a LAN or loopback the
    // streams share no long queue worth protecting, and a cap set from one busy moment of a
    // loaded host would hold a fast local transfer back until probing lifted it.
    static constexpr uint32_t kMinRttUs = 2000;
    // fds[i] is stream i + 1, borrowed (open until join() returns); verbose gets what it does.
    StreamPacer(std::vector<int> fds, std::function<void(const std::string&)> verbose);
    ~StreamPacer() { join(); }
    StreamPacer(const StreamPacer&) = delete;
    StreamPacer& operator=(const StreamPacer&) = delete;

    void start();
    // Stops the thread and lifts the caps (the last bytes drain unpaced). Idempotent.
    void join();
    // After join(): what it did, for -v and Stats ("" when it never capped).
    const std::string& summary() const { return summary_; }

private:
    void run();
    void cap(uint64_t per_stream_bytes_per_s);

    std::vector<int> fds_;
    std::function<void(const std::string&)> verbose_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stopped_ = false;
    std::thread thread_;
    uint64_t cap_ = 0; // per stream, bytes per second; 0: not capped
    unsigned refused_ = 0; // the most streams whose socket refused a cap in one round
    std::string summary_;
};

} // namespace sluice
