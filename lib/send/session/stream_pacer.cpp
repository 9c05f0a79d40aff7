#include "send/session/stream_pacer.hpp"

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <numeric>

#include <sys/socket.h>

namespace sluice {

StreamPacer::StreamPacer(std::vector<int> fds, std::function<void(const std::string&)> verbose,
                         std::function<unsigned()> settled)
    : fds_(std::move(fds)), verbose_(std::move(verbose)), settled_(std::move(settled)) {}

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
void StreamPacer::cap(uint64_t per_stream, std::span<const uint64_t> caps) {
    unsigned refused = 0;
    for (size_t i = 0; i < fds_.size(); ++i) {
        const uint64_t v = !per_stream ? ~uint64_t{0} : i < caps.size() ? caps[i] : per_stream;
        refused += ::setsockopt(fds_[i], SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof v) != 0;
    }
    if (per_stream) refused_ = std::max(refused_, refused);
    cap_ = per_stream;
    if (per_stream) last_cap_ = per_stream;
}

bool pacer_waits(bool automatic, unsigned settled) { return automatic && settled == 0; }

std::string pacing_choice(Pacing asked, const std::string& cc, bool streams_auto) {
    if (asked == Pacing::on) return "on (asked: --pace)";
    if (asked == Pacing::off) return "off (asked: --no-pace)";
    // Measured at 80 ms on a 100 Mbit/s bottleneck without random loss (docs/benchmarks.md,
    // h16i): 8 BBR streams retransmitted 11-15% of their bytes unpaced and 0.4-0.8% paced at the
    // same rate; CUBIC's 0.2-1.0% unpaced. With --streams auto the caps held the ramp back
    // (57-65 Mbit/s against 85-86 unpaced) while they were set during the search, so there
    // the pacer begins once the count is settled (h16j).
    if (cc == "bbr" && streams_auto)
        return "on (default with bbr: BBR streams that probe one by one overfill a shared bottleneck; with "
               "--streams auto from when the count is settled; --no-pace turns it off)";
    if (cc == "bbr")
        return "on (default with bbr: BBR streams that probe one by one overfill a shared bottleneck; "
               "--no-pace turns it off)";
    return "off (default with " + (cc.empty() ? std::string("no data stream") : cc) +
           ": pacing together is for bbr's probing; --pace turns it on)";
}

static std::string mbit(double bytes_per_s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f Mbit/s", bytes_per_s * 8 / 1e6);
    return b;
}

// For the first cap's line: how long BBR's start-up held the judgement back.
static std::string startup_note(const PaceModel& m) {
    std::string note = m.startup_rounds() ? " (after " + std::to_string(m.startup_rounds()) + " stalled rounds in BBR's start-up)" : "";
    if (m.dip_rounds())
        note += " (after " + std::to_string(m.dip_rounds()) +
                " rounds under half the rate it began at: the streams given back were ending, those kept regrowing)";
    return note;
}

// The last step down, for -v: how much was lost with how much of a queue, and the caps' factor now.
static std::string trim_note(const PaceModel& m) {
    char b[160];
    std::snprintf(b, sizeof b, "%.2f%% resent with the round trip at %.2fx its lowest: caps lowered to %.0f%% of the measured rate",
                  100 * m.trim_share(), m.trim_rtt(), 100 * m.trim());
    return b;
}

// Why a lossy window was the path's own loss: no queue stood, or lowering the caps did not stop it.
static std::string loss_note(const PaceModel& m) {
    if (m.lost_rtt() <= 0) return "";
    char b[160];
    if (m.lost_rtt() < PaceModel::kQueueRtt)
        std::snprintf(b, sizeof b, ", with the round trip at %.2fx its lowest (no standing queue to overflow)", m.lost_rtt());
    else
        std::snprintf(b, sizeof b, ", still with the caps lowered to %.0f%% of the measured rate (round trip %.2fx its lowest)",
                      100 * m.trim(), m.lost_rtt());
    return b;
}

// One round is one smoothed round trip of the first stream (20 ms to 1 s): the aggregate is
// measured per round, as BBR measures one flow. The share is per stream that moved data in
// the round: a stream without work (--streams auto's idle ones, the last blocks of a
// transfer) leaves its share to the others from the next round on.
void StreamPacer::run() {
    PaceModel model(static_cast<bool>(settled_));
    bool waited = false; // rounds skipped while --streams auto searched
    unsigned rounds = 0;
    bool short_said = false;
    std::vector<uint64_t> prev(fds_.size()), prev_sent(fds_.size()), prev_retrans(fds_.size());
    for (size_t i = 0; i < fds_.size(); ++i) {
        prev[i] = bytes_delivered(fds_[i]);
        const StreamTcp t = stream_tcp(fds_[i], static_cast<unsigned>(i + 1));
        prev_sent[i] = t.bytes_sent;
        prev_retrans[i] = t.bytes_retrans;
    }
    // Each stream's delivered rate in the last kWindowRounds rounds (a ring, round % size), for
    // its demand; allocated once, not per round.
    const size_t n = fds_.size();
    std::vector<double> history(n * PaceModel::kWindowRounds), demand(n);
    std::vector<uint64_t> caps(n), moved_by(n);
    unsigned slot = 0;
    // A stream that delivered only a frame or two is not moving data: with --streams auto the
    // streams past the settled count end with STREAM_END, which counted as a move made the
    // pacer wait for the count again and begin twice.
    constexpr uint64_t kQuietBytes = 4096;
    auto t_prev = std::chrono::steady_clock::now();
    uint32_t lowest_us = UINT32_MAX; // the path's lowest round trip, over every stream
    bool recap = false;              // caps lifted for now: say when they are set again
    for (;;) {
        const uint32_t rtt_us = stream_tcp(fds_[0], 1).rtt_us;
        const auto round = std::clamp(std::chrono::microseconds(rtt_us), std::chrono::microseconds(20000),
                                      std::chrono::microseconds(1000000));
        {
            std::unique_lock lk(mu_);
            if (cv_.wait_for(lk, round, [&] { return stopped_; })) break;
        }
        // The path's own round trip decides, not the smoothed one: on a loaded loopback that
        // one grew past 2 ms, where pacing would only hold a local transfer back.
        const uint32_t path_us = min_rtt_us(fds_[0]);
        if (path_us < kMinRttUs) {
            if (!short_said) verbose_("pacing: not on a path this short (" + std::to_string(path_us) + " us round trip)");
            short_said = true;
            continue;
        }
        const unsigned settled_count = settled_ ? settled_() : 0;
        uint64_t moved = 0, sent = 0, retrans = 0;
        unsigned moving = 0, starting = 0, probing_rtt = 0;
        // The moving streams' smoothed round trip, for the queue signal: they share the
        // bottleneck's queue, so their mean over the path's lowest says how much of it stands.
        double srtt_sum = 0;
        unsigned srtt_n = 0;
        // A reopened stream's counters start again from 0: its first round counts from there.
        auto since = [](uint64_t now, uint64_t& before) {
            const uint64_t d = now >= before ? now - before : now;
            before = now;
            return d;
        };
        for (size_t i = 0; i < fds_.size(); ++i) {
            const uint64_t now = bytes_delivered(fds_[i]);
            moved_by[i] = now > prev[i] ? now - prev[i] : 0;
            if (now > prev[i]) moved += now - prev[i];
            if (now > prev[i] + kQuietBytes) {
                ++moving;
                if (!model.full()) starting += in_bbr_startup(fds_[i]); // read only until the pipe is full
                else probing_rtt += in_bbr_probe_rtt(fds_[i]);         // and this only while capped
            }
            prev[i] = now;
            const StreamTcp t = stream_tcp(fds_[i], static_cast<unsigned>(i + 1));
            sent += since(t.bytes_sent, prev_sent[i]);
            retrans += since(t.bytes_retrans, prev_retrans[i]);
            if (moved_by[i] > kQuietBytes && t.rtt_us > 0) {
                srtt_sum += t.rtt_us, ++srtt_n;
                if (const uint32_t m = min_rtt_us(fds_[i]); m >= kMinRttUs) lowest_us = std::min(lowest_us, m);
            }
        }
        const double queue_rtt = srtt_n && lowest_us != UINT32_MAX ? srtt_sum / srtt_n / lowest_us : 0.0;
        const auto t = std::chrono::steady_clock::now();
        const double secs = std::chrono::duration<double>(t - t_prev).count();
        const double rate = static_cast<double>(moved) / secs;
        t_prev = t;
        for (size_t i = 0; i < n; ++i) history[i * PaceModel::kWindowRounds + slot] = static_cast<double>(moved_by[i]) / secs;
        slot = (slot + 1) % PaceModel::kWindowRounds;
        if (pacer_waits(static_cast<bool>(settled_), settled_count)) { // counters kept current
            waited = true;
            continue;
        }
        if (waited) {
            waited = false;
            verbose_("pacing: --streams auto settled its count; the pacer begins at " + mbit(rate) + " over " +
                     std::to_string(moving) + " streams");
        }
        const unsigned stalls = model.startup_rounds();
        const unsigned trims = model.trims(), rearms = model.rearms();
        const uint64_t per = model.round(rate, moving, sent, retrans, starting, probing_rtt, queue_rtt);
        if (model.trims() > trims)
            verbose_("pacing: " + trim_note(model) + " (the bottleneck's queue overflowing under the caps: lowered, not lifted)");
        if (stalls == 0 && model.startup_rounds() == 1)
            verbose_("pacing: the aggregate stopped growing at " + mbit(rate) + " with " + std::to_string(starting) + " of " +
                     std::to_string(moving) + " streams still in BBR's start-up: not judged full until they leave it");
        if (model.rearms() > rearms) {
            char share[32];
            std::snprintf(share, sizeof share, "%.0f%%", 100 * model.held_share());
            verbose_("pacing: caps lifted for now after " + std::to_string(rounds) + " rounds: they held the streams' rate to " +
                     share + " of what it was when they began; capped again once the aggregate stops growing");
            cap(0);
            recap = true;
            continue;
        }
        if (model.held_back()) {
            char share[32];
            std::snprintf(share, sizeof share, "%.0f%%", 100 * model.held_share());
            lifted_ = "caps lifted for good after " + std::to_string(rounds) + " rounds: they held the streams' rate to " + share +
                      " of what it was when they began, the " + std::to_string(PaceModel::kRearms + 1) +
                      "th time (streams whose own estimate is under their share leave it unused)";
            verbose_("pacing: " + lifted_);
            cap(0);
            break;
        }
        if (model.lifted()) {
            char share[32];
            std::snprintf(share, sizeof share, "%.2f%%", 100 * model.lost_share());
            lifted_ = rounds ? "caps lifted after " + std::to_string(rounds) + " rounds: the path lost " + share +
                                   " of the bytes sent while they held" + loss_note(model) + " (its own loss: there they only cost rate)"
                             : std::string("not capped: the path lost ") + share +
                                   " of the bytes sent while the streams' rate still grew" + loss_note(model) +
                                   " (its own loss: there caps only cost rate)";
            verbose_("pacing: " + lifted_);
            cap(0);
            break;
        }
        if (per == 0) continue;
        if (recap) {
            recap = false;
            verbose_("pacing: the pipe is full again at " + mbit(rate) + " over " + std::to_string(moving) + " streams: capped");
        }
        if (rounds++ == 0)
            verbose_("pacing: the pipe is full at " + mbit(rate) + " over " + std::to_string(moving) +
                     " streams" + startup_note(model) + ": each capped at its share from now on, probing together");
        // Split among the streams that moved this round; the others keep the even share (one
        // between blocks takes it up again at once).
        for (size_t i = 0; i < n; ++i) {
            const auto* h = &history[i * PaceModel::kWindowRounds];
            demand[i] = moved_by[i] > kQuietBytes ? PaceModel::kRoom * *std::max_element(h, h + PaceModel::kWindowRounds) : -1;
            caps[i] = per;
        }
        share_caps(static_cast<double>(per) * moving, demand, caps);
        cap(per, caps);
    }
    if (!cap_ && lifted_.empty() && model.startup_rounds() > 0) { // said: why the streams ran unpaced
        summary_ = "not capped: the aggregate stalled for " + std::to_string(model.startup_rounds()) +
                   " rounds while streams were still in BBR's start-up, and the pipe was not judged full after";
        verbose_("pacing: " + summary_);
    }
    if (cap_ || !lifted_.empty()) {
        summary_ = rounds == 0 ? lifted_
                               : "streams paced together for " + std::to_string(rounds) + " rounds, last cap " +
                                     mbit(static_cast<double>(last_cap_)) + " per stream" + (lifted_.empty() ? "" : "; " + lifted_);
        if (model.trims())
            summary_ += "; lowered " + std::to_string(model.trims()) + " times for the queue overflowing under them, last: " +
                        trim_note(model) + "; factor at the end " + std::to_string(static_cast<int>(100 * model.trim() + 0.5)) + "%";
        if (model.rearms())
            summary_ += "; lifted for now " + std::to_string(model.rearms()) +
                        " times for holding the rate under " + std::to_string(static_cast<int>(100 * PaceModel::kHeldBack)) +
                        "% of where they began, capped again once the pipe was full";
        if (model.measured_rounds())
            summary_ += "; " + std::to_string(model.measured_rounds()) +
                        " rounds based on the bottleneck's rate measured while its queue stood (under the window's best)";
        if (model.probe_rtt_rounds())
            summary_ += "; " + std::to_string(model.probe_rtt_rounds()) +
                        " rounds not judged for caps holding the rate back (a stream in or just out of BBR's PROBE_RTT)";
        // Said, not hidden: such a stream paced itself (an MPTCP socket refuses the option).
        if (refused_)
            summary_ += "; " + std::to_string(refused_) + " of " + std::to_string(fds_.size()) +
                        " streams refused the cap (SO_MAX_PACING_RATE; MPTCP sockets do)";
        if (rounds) verbose_("pacing: " + summary_); // never capped: said when it was decided
        cap(0);
    }
}

} // namespace sluice
