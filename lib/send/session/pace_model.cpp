#include "send/session/pace_model.hpp"

#include <algorithm>
#include <iterator>
#include <numeric>

namespace sluice {

void share_caps(double budget, std::span<const double> demand, std::span<uint64_t> caps) {
    constexpr uint64_t kPending = ~uint64_t{0};
    unsigned left = 0;
    for (size_t i = 0; i < demand.size(); ++i)
        if (demand[i] >= 0) caps[i] = kPending, ++left;
    // Each pass gives every stream under the even share of what is left its demand; the even
    // share only grows as they drop out (each took less than it), so it ends within n passes.
    for (bool took = true; took && left > 0;) {
        took = false;
        const double even = budget / left;
        for (size_t i = 0; i < demand.size(); ++i) {
            if (caps[i] != kPending || demand[i] < 0 || demand[i] >= even) continue;
            caps[i] = std::max<uint64_t>(1, static_cast<uint64_t>(demand[i]));
            budget -= demand[i];
            --left;
            took = true;
        }
    }
    if (left == 0) return;
    const uint64_t even = std::max<uint64_t>(1, static_cast<uint64_t>(std::max(0.0, budget) / left));
    for (size_t i = 0; i < demand.size(); ++i)
        if (demand[i] >= 0 && caps[i] == kPending) caps[i] = even;
}

// The rounds' mean of a window (0 when empty).
static double mean_of(const std::deque<double>& w) {
    return w.empty() ? 0.0 : std::accumulate(w.begin(), w.end(), 0.0) / static_cast<double>(w.size());
}

// A judged window that lost kPathLoss or more: the caps are lowered when the bottleneck's queue
// stood through it (the loss may be its overflow under them), else lifted for good. Returns
// whether they were lifted.
bool PaceModel::judge_loss(double share, double queue_rtt) {
    if (queue_rtt >= kQueueRtt && trim_ > kTrimFloor) {
        trim_ = std::max(kTrimFloor, trim_ * kTrimStep);
        ++trims_;
        trim_share_ = share;
        trim_rtt_ = queue_rtt;
        // Judged again only on rounds under the lowered caps: the next ones still repair what
        // the queue dropped before.
        sent_window_.clear();
        rtt_window_.clear();
        trim_settle_left_ = kTrimSettleRounds;
        return false;
    }
    lifted_ = true;
    lost_share_ = share;
    lost_rtt_ = queue_rtt;
    return true;
}

// Caps lifted for now: the pipe is judged full again from this rate on, as at the start.
void PaceModel::rearm(double rate) {
    full_ = false;
    flat_ = 0;
    plateau_ = rate;
    phase_ = 0;
    capped_rounds_ = 0;
    trim_settle_left_ = probe_rtt_left_ = 0;
    sent_window_.clear();
    rtt_window_.clear();
    rate_window_.clear();
    growth_sent_ = growth_retrans_ = 0;
    growth_rtt_ = 0;
    growth_rounds_ = 0;
}

uint64_t PaceModel::round(double rate, unsigned moving, uint64_t sent, uint64_t retrans, unsigned starting,
                          unsigned probing_rtt, double queue_rtt) {
    if (lifted_) return 0;
    if (moving == 0) return 0; // no work on the streams yet (the manifest's first answer)
    window_.push_back(rate);
    queued_.push_back(queue_rtt >= kQueueRtt);
    if (window_.size() > kWindowRounds) window_.pop_front(), queued_.pop_front();
    if (moving > most_moving_) {
        most_moving_ = moving;
        if (full_) { // measured at 80 ms: a pipe "full" at 4 Mbit/s over the first streams held auto's ramp to 57 Mbit/s of 96
            full_ = false;
            flat_ = 0;
            plateau_ = rate;
            phase_ = 0;
            capped_rounds_ = 0;
            sent_window_.clear();
            rtt_window_.clear();
            rate_window_.clear();
            return 0;
        }
    }
    if (seed_) {
        seed_ = false;
        plateau_ = seed_rate_ = rate;
        return 0;
    }
    if (!full_) {
        if (rate >= plateau_ * kGrowth) {
            plateau_ = rate;
            flat_ = 0;
            growth_sent_ += sent;
            growth_retrans_ += retrans;
            growth_rtt_ += queue_rtt;
            ++growth_rounds_;
            return 0;
        }
        if (starting > 0) { // a stall of BBR's start-up (random loss), not a full pipe
            ++startup_rounds_;
            return 0;
        }
        if (rate < kDipShare * seed_rate_ && dip_rounds_ < kDipRounds) { // the count's change, not the path
            ++dip_rounds_;
            flat_ = 0;
            plateau_ = rate; // growth from here on is the regrowth
            return 0;
        }
        if (++flat_ < kFlatRounds) return 0;
        full_ = true;
        const double grown_rtt = growth_rounds_ ? growth_rtt_ / growth_rounds_ : 0.0;
        // Lost while nothing could queue: the path's own loss, never capped. Lost while the
        // queue stood (start-up's overshoot of the bottleneck's buffer) says nothing about the
        // path: judged under the caps, where lowering them tells the two apart.
        if (growth_sent_ > 0 && static_cast<double>(growth_retrans_) >= kPathLoss * static_cast<double>(growth_sent_) &&
            grown_rtt < kQueueRtt) {
            lifted_ = true;
            lost_share_ = static_cast<double>(growth_retrans_) / static_cast<double>(growth_sent_);
            lost_rtt_ = grown_rtt;
            return 0;
        }
        // The flat rounds that found the pipe full, averaged: one round of 80 ms at 600 Mbit/s
        // read anywhere from 280 to 550 (h16j), its maximum a burst, not a rate.
        capped_at_ = std::accumulate(window_.end() - kFlatRounds, window_.end(), 0.0) / kFlatRounds;
        capped_moving_ = moving;
    }
    // Judged only after the caps have held a few rounds: the first still repair what slow
    // start's overshoot lost.
    if (++capped_rounds_ > kSettleRounds) {
        if (trim_settle_left_ > 0) {
            --trim_settle_left_;
        } else {
            sent_window_.emplace_back(sent, retrans);
            rtt_window_.push_back(queue_rtt);
            if (sent_window_.size() > kJudgeRounds) sent_window_.pop_front(), rtt_window_.pop_front();
            uint64_t s = 0, r = 0;
            for (const auto& [a, b] : sent_window_) s += a, r += b;
            if (sent_window_.size() == kJudgeRounds && s > 0) {
                const double share = static_cast<double>(r) / static_cast<double>(s);
                if (share >= kPathLoss) {
                    if (judge_loss(share, mean_of(rtt_window_))) return 0;
                } else if (trim_ < 1.0) { // a whole window clean under lowered caps: back up a step
                    trim_ = std::min(1.0, trim_ + kTrimRaise);
                    sent_window_.clear();
                    rtt_window_.clear();
                }
            }
        }
        if (probing_rtt > 0) probe_rtt_left_ = kProbeRttRounds;
        // Fewer streams moving (the transfer's last blocks) is no sign of caps holding back.
        if (moving < capped_moving_) rate_window_.clear();
        else if (probe_rtt_left_ > 0) --probe_rtt_left_, ++probe_rtt_rounds_; // BBR's own dip: not judged
        else rate_window_.push_back(rate);
        if (rate_window_.size() > kJudgeRounds) rate_window_.pop_front();
        // Against where the caps began times their trim: caps lowered on purpose hold the rate
        // down as meant.
        if (rate_window_.size() == kJudgeRounds && mean_of(rate_window_) < kHeldBack * capped_at_ * trim_) {
            held_share_ = mean_of(rate_window_) / capped_at_;
            if (rearms_ < kRearms) {
                ++rearms_;
                rearm(rate);
            } else {
                lifted_ = held_back_ = true;
            }
            return 0;
        }
    }
    const double best = *std::max_element(window_.begin(), window_.end());
    // Rounds in which the queue stood delivered at the bottleneck's rate (it was never idle):
    // their mean is that rate, where the window's maximum of noisy rounds sits above it.
    double queued_sum = 0;
    unsigned queued_rounds = 0;
    for (size_t i = 0; i < window_.size(); ++i)
        if (queued_[i]) queued_sum += window_[i], ++queued_rounds;
    double base = best;
    if (queued_rounds >= kQueuedRounds) {
        base = std::min(best, std::max(kLeastBase * best, queued_sum / queued_rounds));
        if (base < best) ++measured_rounds_;
    }
    const double gain = kGains[phase_];
    phase_ = (phase_ + 1) % std::size(kGains);
    return static_cast<uint64_t>(base * gain * trim_ / moving);
}

} // namespace sluice
