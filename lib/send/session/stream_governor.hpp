#pragma once
// `--streams auto` (issue 16): the sender opens up to SendOptions::streams data streams but
// lets only some of them take work, and chooses how many from what TCP reports on the link.
// It starts with kStartStreams and (stream_search.hpp) doubles the count while the aggregate rate (bytes the
// receiver's TCP acknowledged, summed over every stream, per period, the mean of a count's last
// two periods once it has stopped growing with the count in place) grows by at least 10% per
// doubling and by more than the spread between those periods; a gain within that noise keeps
// the smaller count; a gain under 10% where the noise is smaller keeps the smaller count if the larger one
// only added retransmits (its retransmitted share of the bytes rose), else the faster one.
// One search per transfer, then the count holds: a search is several round trips long and
// the streams it adds start in slow start, so re-probing would cost more than it finds.
// Every step and the reason for the choice go to -v and to Stats::streams_choice.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/sluice.hpp"

namespace sluice {

class StreamGovernor {
public:
    // As many as a fixed count's default (kDefaultStreams): a search takes 2 periods (>= 0.5 s)
    // per step, so a transfer shorter than that runs on the starting count, and starting at 2
    // lost to 4 fixed streams on short LAN transfers (h16j: the wdt-report sets at 1/64 scale).
    static constexpr unsigned kStartStreams = kDefaultStreams;
    // Below this round trip (the control connection's lowest, tcpi_min_rtt) --streams auto opens
    // kDefaultStreams and does not search (connect.cpp): on a LAN or loopback more streams do
    // not add rate here, and opening 16 (each with its TLS handshake off loopback) and
    // searching made 0.3-0.7 s LAN transfers 5-28% slower than 4 fixed streams (h16j, the
    // wdt-report sets at 1/64 scale). The pacer's threshold (StreamPacer::kMinRttUs) too.
    static constexpr uint32_t kMinRttUs = 2000;

    // fixed (automatic false): every stream may send, no thread runs. fds[i] is stream i + 1,
    // borrowed: they must stay open until join() has returned.
    StreamGovernor(std::vector<int> fds, bool automatic, std::function<void(const std::string&)> verbose);
    ~StreamGovernor() { join(); }
    StreamGovernor(const StreamGovernor&) = delete;
    StreamGovernor& operator=(const StreamGovernor&) = delete;

    // Starts the search (automatic only), once the streams are open.
    void start();
    // Whether the count holds from now on: fixed, or the search is over (or never began).
    // The pacer waits for it (stream_pacer.hpp): caps set while streams are still being
    // added held auto's ramp back (h16i).
    bool settled() const { return settled_->load() != 0; }
    // How many streams take work to the end (the first ones): the count once settled, 0 before.
    unsigned settled_count() const { return settled_->load(); }
    // The count settled (0 while the search goes on), for a thread that may outlive this
    // governor (the pacer's, on an error path).
    std::shared_ptr<const std::atomic<unsigned>> settled_flag() const { return settled_; }
    // Whether stream i (from 0) may take work now.
    bool may_take(size_t i);
    // Blocks stream i while it may not take work; returns at once after stop(), and once the
    // count is settled (then retired() says whether the stream is past it).
    void await_turn(size_t i);
    // Stream i is past the settled count and will never take work again: it ends (STREAM_END)
    // rather than sit silent, since the receiver fails a data stream silent for its idle
    // timeout (a 40 s run at 80 ms, auto settled on 4 of 16: "no data from the sender on
    // stream 11 for 30 s", h16m).
    bool retired(size_t i);
    // The transfer has no more work or stopped: every waiting stream goes on (to its end).
    // Any thread, any number of times.
    void stop();
    // Stops and waits for the search thread (before the sockets close).
    void join();

    // After join(): how many streams took work at the end, and why (empty when fixed).
    unsigned used() const { return active_; }
    const std::string& choice() const { return choice_; }

private:
    void search();
    // Sleeps for d or until stop(); returns false once stopped.
    bool sleep_for(std::chrono::milliseconds d);
    void set_active(unsigned n);
    struct Sample {
        uint64_t acked = 0, sent = 0, retrans = 0;
        double queued = 0; // the taking streams' smoothed round trip over their lowest, averaged (0: unknown)
    };
    Sample sample() const;

    std::vector<int> fds_;
    bool automatic_;
    std::function<void(const std::string&)> verbose_;
    std::mutex mu_;
    std::condition_variable cv_;
    unsigned active_;
    bool stopped_ = false;
    std::shared_ptr<std::atomic<unsigned>> settled_;
    std::string choice_;
    std::thread thread_;
};

} // namespace sluice
