#include "send/session/stream_governor.hpp"

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "send/session/stream_search.hpp"

#include <algorithm>
#include <cstdio>

namespace sluice {


StreamGovernor::StreamGovernor(std::vector<int> fds, bool automatic, std::function<void(const std::string&)> verbose)
    : fds_(std::move(fds)), automatic_(automatic), verbose_(std::move(verbose)),
      active_(automatic ? std::min<unsigned>(kStartStreams, static_cast<unsigned>(fds_.size()))
                        : static_cast<unsigned>(fds_.size())),
      settled_(std::make_shared<std::atomic<unsigned>>(automatic ? 0 : active_)) {}

void StreamGovernor::start() {
    if (!automatic_) return;
    if (active_ >= fds_.size()) {
        settled_->store(active_);
        choice_ = "auto: " + std::to_string(active_) + " of " + std::to_string(fds_.size()) + " streams (no more opened)";
        return;
    }
    verbose_("streams auto: starting with " + std::to_string(active_) + " of " + std::to_string(fds_.size()) +
             " open streams");
    thread_ = std::thread([this] { search(); });
}

bool StreamGovernor::may_take(size_t i) {
    if (!automatic_) return true;
    std::lock_guard lk(mu_);
    return stopped_ || i < active_;
}

void StreamGovernor::await_turn(size_t i) {
    if (!automatic_) return;
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return stopped_ || i < active_ || settled_->load() != 0; });
}

bool StreamGovernor::retired(size_t i) {
    if (!automatic_) return false;
    std::lock_guard lk(mu_);
    return settled_->load() != 0 && i >= active_;
}

void StreamGovernor::stop() {
    {
        std::lock_guard lk(mu_);
        stopped_ = true;
    }
    cv_.notify_all();
}

void StreamGovernor::join() {
    stop();
    if (thread_.joinable()) thread_.join();
}

bool StreamGovernor::sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lk(mu_);
    return !cv_.wait_for(lk, d, [&] { return stopped_; });
}

void StreamGovernor::set_active(unsigned n) {
    {
        std::lock_guard lk(mu_);
        active_ = n;
    }
    cv_.notify_all();
}

StreamGovernor::Sample StreamGovernor::sample() const {
    Sample s;
    double ratios = 0;
    unsigned timed = 0;
    for (size_t i = 0; i < fds_.size(); ++i) {
        StreamTcp t = stream_tcp(fds_[i], static_cast<unsigned>(i + 1));
        s.acked += bytes_acked(fds_[i]);
        s.sent += t.bytes_sent;
        s.retrans += t.bytes_retrans;
        // Only the streams taking work (active_ is written by this thread, the search's): one
        // given back and idle has no recent round trip to tell.
        const uint32_t lowest = i < active_ ? min_rtt_us(fds_[i]) : 0;
        if (lowest && t.rtt_us) ratios += static_cast<double>(t.rtt_us) / lowest, ++timed;
    }
    s.queued = timed ? ratios / timed : 0;
    return s;
}

// Runs on its own thread until stop(). Each step: periods measured until one grows by less
// than StreamSearch::kGrowth over the one before (the streams just added have left start-up),
// at least two, at most StreamSearch::kRampPeriods; the count is judged on the last two (their
// mean rate, and how far apart they stood: StreamSearch::spread()). The period is 8 smoothed
// round trips of the first stream (at least 250 ms, at most 2 s): long enough to hold several
// congestion windows' worth of acknowledgements, short enough that a search ends within seconds.
void StreamGovernor::search() {
    const unsigned opened = static_cast<unsigned>(fds_.size());
    StreamSearch s(active_, opened);
    auto period = [&] {
        const uint32_t rtt_us = stream_tcp(fds_[0], 1).rtt_us;
        return std::clamp(std::chrono::milliseconds(rtt_us * 8 / 1000), std::chrono::milliseconds(250),
                          std::chrono::milliseconds(2000));
    };
    const auto began = std::chrono::steady_clock::now();
    std::string why = "the transfer ended before the search did";
    bool stopped = false;
    for (;;) {
        StreamSearch::Periods p;
        double queued = 0;
        bool again = true;
        Sample a = sample();
        auto t0 = std::chrono::steady_clock::now();
        while (again) {
            if (!sleep_for(period())) {
                stopped = true;
                break;
            }
            const Sample b = sample();
            const auto t1 = std::chrono::steady_clock::now();
            // No work yet (the manifest's first answer), or a reopened stream's counters began
            // again from 0: measure again.
            if (b.acked < a.acked || !StreamSearch::had_work(b.acked - a.acked, active_)) {
                a = b, t0 = t1;
                continue;
            }
            again = p.add(static_cast<double>(b.acked - a.acked) / std::chrono::duration<double>(t1 - t0).count(),
                          b.sent > a.sent ? b.sent - a.sent : 0, b.retrans > a.retrans ? b.retrans - a.retrans : 0);
            queued = b.queued;
            a = b, t0 = t1;
        }
        if (stopped) break;
        StreamSearch::Step step = s.measured(p, queued);
        char when[64];
        std::snprintf(when, sizeof when, " (%u periods, %.1f s in)", p.count(),
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
        verbose_("streams auto: " + s.steps().substr(s.steps().rfind("; ") == std::string::npos ? 0 : s.steps().rfind("; ") + 2) +
                 when + (step.done ? "" : " -> trying " + std::to_string(step.count)));
        set_active(step.count);
        if (step.done) {
            why = step.why;
            break;
        }
    }
    std::string choice = "auto: " + std::to_string(active_) + " of " + std::to_string(opened) + " streams (" + why + ")" +
                         (s.steps().empty() ? "" : "; measured: " + s.steps());
    // Said before the count is published: the pacer begins once it is (and says so), so its
    // lines follow this one. Said after, the pacer's came first now and then (wan-pacing-auto
    // under scripts/test-tsan's slower threads).
    verbose_("streams " + choice + (active_ < opened ? "; the other " + std::to_string(opened - active_) + " end" : ""));
    {
        std::lock_guard lk(mu_);
        choice_ = std::move(choice);
        settled_->store(std::max(active_, 1u));
    }
    cv_.notify_all(); // the streams past the count end now (retired())
}

} // namespace sluice
