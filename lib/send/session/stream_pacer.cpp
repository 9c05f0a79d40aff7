#include "send/session/stream_pacer.hpp"

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include <sys/socket.h>

namespace sluice {

StreamPacer::StreamPacer(std::vector<int> fds, std::function<void(const std::string&)> verbose)
    : fds_(std::move(fds)), verbose_(std::move(verbose)) {}

void StreamPacer::start() {
    if (fds_.size() < 2) return; // one stream has nobody to share the path with
    thread_ = std::thread([this] { run(); });
}

void StreamPacer::join() {
    {
        std::lock_guard lk(mu_);
        stopped_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

// SO_MAX_PACING_RATE in bytes per second; ~0 lifts it. A socket that refuses keeps its own
// pace (nothing to undo): the cap only lowers what TCP would do.
void StreamPacer::cap(uint64_t per_stream) {
    const uint64_t v = per_stream ? per_stream : ~uint64_t{0};
    unsigned refused = 0;
    for (int fd : fds_) refused += ::setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof v) != 0;
    if (per_stream) refused_ = std::max(refused_, refused);
    cap_ = per_stream;
}

static std::string mbit(double bytes_per_s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f Mbit/s", bytes_per_s * 8 / 1e6);
    return b;
}

uint64_t PaceModel::round(double rate, unsigned moving) {
    if (moving == 0) return 0; // no work on the streams yet (the manifest's first answer)
    window_.push_back(rate);
    if (window_.size() > kWindowRounds) window_.pop_front();
    if (!full_) {
        if (rate >= plateau_ * kGrowth) {
            plateau_ = rate;
            flat_ = 0;
            return 0;
        }
        if (++flat_ < kFlatRounds) return 0;
        full_ = true;
    }
    const double best = *std::max_element(window_.begin(), window_.end());
    const double gain = kGains[phase_];
    phase_ = (phase_ + 1) % std::size(kGains);
    return static_cast<uint64_t>(best * gain / moving);
}

// One round is one smoothed round trip of the first stream (20 ms to 1 s): the aggregate is
// measured per round, as BBR measures one flow. The share is per stream that moved data in
// the round: a stream without work (--streams auto's idle ones, the last blocks of a
// transfer) leaves its share to the others from the next round on.
void StreamPacer::run() {
    PaceModel model;
    unsigned rounds = 0;
    bool short_said = false;
    std::vector<uint64_t> prev(fds_.size());
    for (size_t i = 0; i < fds_.size(); ++i) prev[i] = bytes_delivered(fds_[i]);
    auto t_prev = std::chrono::steady_clock::now();
    for (;;) {
        const uint32_t rtt_us = stream_tcp(fds_[0], 1).rtt_us;
        const auto round = std::clamp(std::chrono::microseconds(rtt_us), std::chrono::microseconds(20000),
                                      std::chrono::microseconds(1000000));
        {
            std::unique_lock lk(mu_);
            if (cv_.wait_for(lk, round, [&] { return stopped_; })) break;
        }
        if (rtt_us < kMinRttUs) {
            if (!short_said) verbose_("pacing: not on a path this short (" + std::to_string(rtt_us) + " us round trip)");
            short_said = true;
            continue;
        }
        uint64_t moved = 0;
        unsigned moving = 0;
        for (size_t i = 0; i < fds_.size(); ++i) {
            const uint64_t now = bytes_delivered(fds_[i]); // a reopened stream starts again from 0
            if (now > prev[i]) {
                moved += now - prev[i];
                ++moving;
            }
            prev[i] = now;
        }
        const auto t = std::chrono::steady_clock::now();
        const double rate = static_cast<double>(moved) / std::chrono::duration<double>(t - t_prev).count();
        t_prev = t;
        const uint64_t per = model.round(rate, moving);
        if (per == 0) continue;
        if (rounds++ == 0)
            verbose_("pacing: the pipe is full at " + mbit(rate) + " over " + std::to_string(moving) +
                     " streams: each capped at its share from now on, probing together");
        cap(per);
    }
    if (cap_) {
        summary_ = "streams paced together for " + std::to_string(rounds) + " rounds, last cap " +
                   mbit(static_cast<double>(cap_)) + " per stream";
        // Said, not hidden: such a stream paced itself (an MPTCP socket refuses the option).
        if (refused_)
            summary_ += "; " + std::to_string(refused_) + " of " + std::to_string(fds_.size()) +
                        " streams refused the cap (SO_MAX_PACING_RATE; MPTCP sockets do)";
        verbose_("pacing: " + summary_);
        cap(0);
    }
}

} // namespace sluice
