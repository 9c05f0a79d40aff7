#pragma once
// The decision of `--streams auto` (stream_governor.hpp), apart from the clock and the
// sockets so that it can be tested: given the aggregate rate and retransmitted share measured
// with the current count, the next count, or the end of the search and why.
#include <string>

namespace sluice {

class StreamSearch {
public:
    static constexpr double kGrowth = 1.10; // a doubling must bring at least 10% more

    struct Step {
        unsigned count = 0; // streams that take work from now on
        bool done = false;  // the search is over: count holds
        std::string why;    // when done
    };

    // start: the first count (at most opened); opened: the streams there are.
    StreamSearch(unsigned start, unsigned opened);
    unsigned current() const { return current_; }
    // rate: bytes per second acknowledged over all streams in one period with current()
    // streams; retrans: the share of the bytes sent in it that were retransmissions.
    Step measured(double rate, double retrans);
    // Each period measured so far, for -v and the JSON ("2 streams 120.0 Mbit/s retrans 0.00%; ...").
    const std::string& steps() const { return steps_; }

private:
    unsigned current_;
    unsigned opened_;
    unsigned best_ = 0;
    double best_rate_ = 0;
    double best_retrans_ = 0;
    std::string steps_;
};

} // namespace sluice
