#include "send/session/stream_search.hpp"

#include <algorithm>
#include <cstdio>

namespace sluice {

namespace {

std::string period_text(unsigned n, double rate, double retrans, double noise) {
    char b[128];
    if (noise > 0)
        std::snprintf(b, sizeof b, "%u streams %.1f Mbit/s (periods %.0f%% apart) retrans %.2f%%", n, rate * 8 / 1e6,
                      100 * noise, 100 * retrans);
    else
        std::snprintf(b, sizeof b, "%u streams %.1f Mbit/s retrans %.2f%%", n, rate * 8 / 1e6, 100 * retrans);
    return b;
}

std::string percent(double share, int decimals = 0) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f%%", decimals, 100 * share);
    return b;
}

} // namespace

StreamSearch::StreamSearch(unsigned start, unsigned opened)
    : current_(std::clamp(start, 1u, std::max(opened, 1u))), opened_(std::max(opened, 1u)) {}

StreamSearch::Step StreamSearch::measured(double rate, double retrans, double queued, double noise) {
    const unsigned n = current_;
    steps_ += (steps_.empty() ? "" : "; ") + period_text(n, rate, retrans, noise);
    if (queued > 0) {
        char q[48];
        std::snprintf(q, sizeof q, " round trip %.2fx the lowest", queued);
        steps_ += q;
    }
    const double need = needed_growth(noise, best_noise_);
    if (best_ == 0 || rate >= best_rate_ * need) {
        best_ = n;
        best_rate_ = rate;
        best_retrans_ = retrans;
        best_noise_ = noise;
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
    // More rate, but not beyond the noise between one count's periods: the doubling is not
    // shown to help, so the smaller count stays. At 14% random loss a period's rate jumps by
    // tens of percent with the count unchanged, and growth that big was being read as the
    // doubling's (h16o); the smaller count costs fewer sockets and handshakes' worth of CPU,
    // and at high loss its streams resent less (4 BBR streams 16.8-17.4% of their bytes at
    // 150 ms and 14%, 16 streams 17.7-20.7%, h16o).
    if (rate > best_rate_ && need > kGrowth) {
        std::string why = std::to_string(n) + " streams gave " + percent(rate / best_rate_ - 1) + " more than " +
                          std::to_string(best_) + ", within the noise between one count's periods (" +
                          percent(need - 1) + ")";
        if (retrans > best_retrans_ * 1.1 + 0.001)
            why += ", with more retransmits (" + percent(retrans, 2) + " against " + percent(best_retrans_, 2) + ")";
        current_ = best_;
        return {current_, true, why};
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
