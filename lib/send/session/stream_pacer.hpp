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
// The share is even among streams that can take it; one that cannot (share_caps) gets what it
// can and leaves the rest to the others.
// Before the pipe is full nothing is capped: capping slow start would slow the ramp-up.
// A path that loses packets on its own (random loss) lifts the caps for good: there the caps
// only cost rate. Measured at 80 ms, 100 Mbit/s (h16i): paced 8 BBR streams moved 25.2 Mbit/s
// at 5% loss and 10.7 at 14% where unpaced they moved 80.5 and 52.2: BBR probes above its
// delivered rate to make up for what the path drops, and a cap at the share of the delivered
// rate cuts those probes off, so each window's best is lower than the last.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "send/session/pace_model.hpp"
#include "sluice/sluice.hpp"

namespace sluice {


// Whether to pace, and why, for Stats::pacing_choice and -v ("on ..." or "off ..."): asked,
// or by the congestion control the streams run (cc: as the kernel names it) and whether the
// stream count is --streams auto.
std::string pacing_choice(Pacing asked, const std::string& cc, bool streams_auto);

// Whether the pacer waits, with --streams auto (automatic): while the governor searches
// (settled 0), not after. Caps set while streams are still being added held auto's ramp back
// (57-65 Mbit/s against 85-86 unpaced at 100 Mbit/s, h16i). Once the count is settled it paces
// every stream that moves, the streams given back finishing the block they hold included
// (share_caps gives a slow one its demand and the rest to the others): waiting for them to
// finish left the transfer unpaced for the whole run, since a stream given back on a full pipe
// can move 0.3 Mbit/s, and an 8 MiB block then takes minutes (h16n: 10.6% retransmitted).
bool pacer_waits(bool automatic, unsigned settled);

class StreamPacer {
public:
    // Below this round trip (the path's lowest, min_rtt_us) the pacer leaves the streams alone: on a LAN or loopback the
    // streams share no long queue worth protecting, and a cap set from one busy moment of a
    // loaded host would hold a fast local transfer back until probing lifted it.
    static constexpr uint32_t kMinRttUs = 2000;
    // fds[i] is stream i + 1, borrowed (open until join() returns); verbose gets what it does.
    // settled (--streams auto: the count StreamGovernor settled on, 0 while it searches) holds
    // the pacer back (pacer_waits); empty: the count is fixed.
    StreamPacer(std::vector<int> fds, std::function<void(const std::string&)> verbose,
                std::function<unsigned()> settled = {});
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
    // Every stream at per_stream (0: lifted), or, with caps, stream i at caps[i].
    void cap(uint64_t per_stream_bytes_per_s, std::span<const uint64_t> caps = {});

    std::vector<int> fds_;
    std::function<void(const std::string&)> verbose_;
    std::function<unsigned()> settled_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stopped_ = false;
    std::thread thread_;
    uint64_t cap_ = 0; // per stream, bytes per second; 0: not capped
    uint64_t last_cap_ = 0; // the last cap set, for the summary after the caps were lifted
    unsigned refused_ = 0; // the most streams whose socket refused a cap in one round
    std::string summary_;
    std::string lifted_; // why the caps were lifted for good ("" while they hold)
};

} // namespace sluice
