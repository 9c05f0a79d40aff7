#include "send/session/stream_search.hpp"

#include <algorithm>
#include <cstdio>

namespace sluice {

namespace {

std::string period_text(unsigned n, double rate, double retrans) {
    char b[96];
    std::snprintf(b, sizeof b, "%u streams %.1f Mbit/s retrans %.2f%%", n, rate * 8 / 1e6, 100 * retrans);
    return b;
}

} // namespace

StreamSearch::StreamSearch(unsigned start, unsigned opened)
    : current_(std::clamp(start, 1u, std::max(opened, 1u))), opened_(std::max(opened, 1u)) {}

StreamSearch::Step StreamSearch::measured(double rate, double retrans, double queued) {
    const unsigned n = current_;
    steps_ += (steps_.empty() ? "" : "; ") + period_text(n, rate, retrans);
    if (queued > 0) {
        char q[48];
        std::snprintf(q, sizeof q, " round trip %.2fx the lowest", queued);
        steps_ += q;
    }
    if (best_ == 0 || rate >= best_rate_ * kGrowth) {
        best_ = n;
        best_rate_ = rate;
        best_retrans_ = retrans;
        if (queued >= kQueued) {
            char why[160];
            std::snprintf(why, sizeof why,
                          "the bottleneck is full at %u streams: their round trip stands at %.2fx the path's lowest, "
                          "more streams would only fill its queue",
                          n, queued);
            return {n, true, why};
        }
        if (n >= opened_) return {n, true, "still growing at the most streams opened"};
        current_ = std::min(n * 2, opened_);
        return {current_, false, {}};
    }
    // Twice the streams brought less than kGrowth. If they only added retransmits (no more
    // rate, a clearly larger retransmitted share) they fight over the bottleneck: back to the
    // smaller count. Otherwise the faster of the two stays.
    const std::string vs = std::to_string(n) + " streams gave " + (rate > best_rate_ ? "less than 10% more" : "no more") +
                           " than " + std::to_string(best_);
    if (rate <= best_rate_ && retrans > best_retrans_ * 1.5 + 0.001) {
        current_ = best_;
        return {current_, true, vs + ", only more retransmits"};
    }
    current_ = rate > best_rate_ ? n : best_;
    return {current_, true, vs};
}

} // namespace sluice
