#pragma once
// The pacer's decisions (issue 16), apart from sockets and clocks: when the pipe is full, each
// stream's cap per round, when the caps are lowered (the bottleneck's queue overflowing under
// them) or lifted (the path's own loss, or caps that hold the streams back), and how a round's
// budget is split (share_caps). StreamPacer (stream_pacer.hpp) feeds it from TCP_INFO.
#include <cstdint>
#include <deque>
#include <span>
#include <utility>

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
    // Once the caps have held for kSettleRounds (start-up's repairs are done), kJudgeRounds
    // rounds in a row whose retransmitted share of the bytes sent reaches kPathLoss mean the
    // path loses on its own: paced streams lose almost nothing to each other (0.00% after
    // start-up at 100 Mbit/s without random loss, h16g and h16i), and at 1% random loss the
    // caps cost 8 streams 10% of their rate (87.5 -> 79.1 Mbit/s, h16i). Judged soon: every
    // capped round on a lossy path lowers BBR's own estimate, which it then has to regrow
    // (lifted after 10 + 10 rounds, 8 streams kept 0.38x their unpaced rate at 14% loss). Not
    // sooner, nor with caps raised by the share lost: judged after 4 rounds, with the caps
    // raised so, start-up's repairs made a path without random loss look lossy (4.5%, h16i).
    static constexpr unsigned kSettleRounds = 6, kJudgeRounds = 6;
    static constexpr double kPathLoss = 0.005;
    // Except where the bottleneck's queue stood through the judged window (the streams' smoothed
    // round trip, averaged, at kQueueRtt or more times the path's lowest): loss there may be the
    // queue overflowing under the caps, not the path's. Measured at 20 ms, 100 Mbit/s without
    // random loss (h16o): the loss rule lifted the caps in 4 of 6 runs ("the path lost
    // 0.51-1.83%"), the unpaced streams then resent up to 9.2%. So the caps are lowered first,
    // by kTrimStep a window down to kTrimFloor of the measured rate; a queue's overflow stops
    // once the aggregate is under the bottleneck's rate, random loss does not (and there the
    // queue drains, so the next lossy window lifts them). Four steps at most: at 20 ms about
    // 40 rounds (1 s), at 80 ms 3 s, while BBR on a lossy path loses its own estimate under
    // caps. A clean window under lowered caps raises them by kTrimRaise, toward the rate again.
    // A one-BDP queue doubles the round trip when full; 1.25 is a quarter of it standing.
    static constexpr double kQueueRtt = 1.25;
    static constexpr double kTrimStep = 0.95, kTrimFloor = 0.85, kTrimRaise = 0.01;
    // Rounds after a step down not judged: they still repair what the queue dropped before it.
    static constexpr unsigned kTrimSettleRounds = 2;
    // The best aggregate is a maximum of noisy rounds: at 20 ms a round's delivered bytes come
    // in ACK bursts and the maximum of ten sat above the path, so caps cruising at 0.95 of it
    // kept a queue standing. Rounds in which the queue stood (round trip at kQueueRtt or more)
    // delivered at the bottleneck's rate throughout: with kQueuedRounds of them in the window,
    // their mean is the base instead of the best, but never under kLeastBase of the best (a
    // round trip that a loaded host, not a queue, stretched must not pull the caps down and
    // the rate with them).
    static constexpr unsigned kQueuedRounds = 3;
    static constexpr double kLeastBase = 0.9;
    // Nor kept where they hold the streams back: kJudgeRounds judged rounds in a row, with as
    // many streams moving as when the caps began, averaging under kHeldBack of the aggregate
    // they began at (the flat rounds' average). Measured at 80 ms, 100 Mbit/s without random loss (h16j): capped after
    // --streams auto had added 12 streams in the last 1.3 s, 16 streams fell from 96 to 48-58
    // Mbit/s and stayed there: the streams added last had a small estimate of their own, left
    // their share unused, and the best of the window, and with it every cap, fell each round.
    // Cruising caps keep 0.95 of the aggregate and a path that got slower is followed within
    // kWindowRounds, so this only lifts caps that cost a fifth of the rate.
    // Lifted for now, not for good, the first kRearms times: the pipe is then measured again
    // unpaced and capped again once the aggregate stops growing. Measured at 20 ms, 100 Mbit/s
    // without random loss (h16o, h16r): the rule fired after 40 to 1,234 rounds (a flat
    // rounds' average read at 129 Mbit/s on a 96 Mbit/s path, or a loaded host's slow rounds),
    // and 8 streams unpaced for the rest of the run resent 6-10%; measured again, the caps
    // cost a few unpaced rounds.
    static constexpr double kHeldBack = 0.8;
    static constexpr unsigned kRearms = 8;
    // Rounds in which a stream is in BBR's PROBE_RTT, and the one after (its refill), are not
    // judged so: measured at 80 ms, 100 Mbit/s, 8 streams started together (h16m): 4 of them in
    // PROBE_RTT at once (every 10 s, 4 packets in flight for 200 ms and a round trip) took the
    // aggregate from 93 to 72, 56 and 48 Mbit/s for three rounds, the judged window's mean to
    // 79% of 95.5, and the caps were lifted for good: unpaced, the streams retransmitted 3.6-7.4%
    // (h16l). That dip is BBR's own, not the caps', and is over within kProbeRttRounds rounds.
    static constexpr unsigned kProbeRttRounds = 2;
    // A stream's demand (share_caps) is its best round of the last kWindowRounds times this: room
    // for BBR's own probe (1.25 times its estimate, the best delivery of ~10 round trips), so a
    // stream under its share is never held under what it would send on its own.
    static constexpr double kRoom = 1.25;
    // Nor capped at all when the rounds in which the aggregate still grew lost that share:
    // without random loss nothing is lost before the pipe is full (slow start's overshoot comes
    // with the end of the growth), and on a lossy path BBR's ramp stalls and grows again, so
    // "full" was seen at a fraction of the path (1.7 Mbit/s of 100 at 5%, 11.5 at 14%: 8 paced
    // streams then kept 0.38x their unpaced rate at 14%, h16i). Unless the growth rounds' round
    // trip stood at kQueueRtt (their loss then the queue's, judged under the caps as above).

    // 0: not capped (the pipe is not full yet, or the caps were lifted); else bytes per second
    // per moving stream. More streams moving than ever before (--streams auto adding some, the
    // first blocks after the manifest's answer) may fill more: the caps wait for the aggregate
    // to stop growing again. sent and retrans: the streams' bytes sent in the round (retransmitted
    // included) and of those retransmitted; 0 and 0 when unknown (never lifts). starting: how
    // many streams are still in BBR's start-up (in_bbr_startup()): while any is, a round that
    // did not grow is not counted toward a full pipe. Measured at 150 ms with 5% random loss
    // (h16j, h16k): the aggregate stalled for three rounds ~2 s in while BBR was still
    // starting up, the pipe was judged full at 1.7 Mbit/s of ~300 and the caps, rising only as
    // fast as the window's best, held 4 streams to 8 Mbit/s in 12 s (iperf3 bbr: 300). BBR
    // leaves start-up by the same test on its own flow, so this waits for the streams' own
    // judgement; an algorithm that cannot say counts 0 (judged from the aggregate alone).
    // probing_rtt: how many streams are in BBR's PROBE_RTT (in_bbr_probe_rtt()), read while capped.
    // queue_rtt: the moving streams' smoothed round trip over the path's lowest (0: unknown,
    // never read as a standing queue: lossy windows then lift the caps as before).
    uint64_t round(double rate, unsigned moving, uint64_t sent = 0, uint64_t retrans = 0, unsigned starting = 0,
                   unsigned probing_rtt = 0, double queue_rtt = 0);
    // Begun after --streams auto settled its count (StreamPacer's settled): the streams have
    // been moving for seconds, so the first round is where the rate is, not growth from
    // nothing, and what it retransmitted is the unpaced streams' own overshoot (BBR: 11-13% at
    // 100 Mbit/s, h16i), not the path's loss: it seeds the growth test and counts for neither.
    // While the aggregate stays under kDipShare of that first round's rate, for up to kDipRounds,
    // a round that did not grow is not counted toward a full pipe either: the count just changed
    // (the streams given back end their blocks, those kept regrow their own estimates), the rate
    // is on its way back, not the path's. Measured at 80 ms, 1 Gbit/s, 5% loss (h16s): the search
    // went 4 -> 8 -> 16 and back to 8, the pacer began at 962 Mbit/s, read 544 and 314 in the
    // next rounds and judged the pipe full at 314 (25 Mbit/s a stream); lifted 11 rounds later for
    // the path's loss, the streams' BBR estimates were a fraction of the path and the last 150 MB
    // took 9 s. Half is below any ProbeBW cycle's dip (0.75); kDipRounds (about 2 s at 80 ms)
    // bounds the wait on a path that did get slower.
    static constexpr double kDipShare = 0.5;
    static constexpr unsigned kDipRounds = 25;
    explicit PaceModel(bool after_search = false) : seed_(after_search) {}
    // Rounds not counted toward a full pipe for sitting under kDipShare of the rate the search ended at.
    unsigned dip_rounds() const { return dip_rounds_; }
    bool full() const { return full_; }
    // Rounds that did not grow and were not counted because a stream was still starting up.
    unsigned startup_rounds() const { return startup_rounds_; }
    // The caps were lifted: the path lost lost_share() of what was sent while they held.
    bool lifted() const { return lifted_; }
    double lost_share() const { return lost_share_; }
    // Lifted because the caps held the rate under kHeldBack (lost_share() then 0): the judged
    // rounds' average over the aggregate the caps began at.
    bool held_back() const { return held_back_; }
    // Times the caps were lifted for now for holding the rate back (held_share() the last one's).
    unsigned rearms() const { return rearms_; }
    double held_share() const { return held_share_; }
    // Capped rounds not judged for kHeldBack because a stream was in (or just left) PROBE_RTT.
    unsigned probe_rtt_rounds() const { return probe_rtt_rounds_; }
    // The round trip over its lowest when the caps were lifted for loss (the judged window's
    // mean; 0 unknown): under kQueueRtt, no queue stood and the loss was the path's.
    double lost_rtt() const { return lost_rtt_; }
    // Steps down for a queue overflowing under the caps, and the last one's loss and round trip.
    unsigned trims() const { return trims_; }
    double trim() const { return trim_; } // the caps' factor now, 1 when never lowered
    double trim_share() const { return trim_share_; }
    double trim_rtt() const { return trim_rtt_; }
    // Capped rounds whose base was the queued rounds' mean, under the window's best.
    unsigned measured_rounds() const { return measured_rounds_; }

private:
    bool judge_loss(double share, double queue_rtt);
    void rearm(double rate);

    std::deque<double> window_; // aggregate rate of the last kWindowRounds rounds
    std::deque<bool> queued_;   // per round of window_: the queue stood (queue_rtt >= kQueueRtt)
    double plateau_ = 0;        // the rate the growth test compares with
    unsigned flat_ = 0, phase_ = 0;
    unsigned startup_rounds_ = 0;
    unsigned most_moving_ = 0; // the most streams that moved in one round so far
    uint64_t growth_sent_ = 0, growth_retrans_ = 0; // in the rounds the aggregate grew
    double growth_rtt_ = 0;                         // their queue_rtt, summed
    unsigned growth_rounds_ = 0;
    bool full_ = false;
    bool seed_ = false; // the next round with moving streams seeds plateau_ (after_search)
    double seed_rate_ = 0; // that round's rate (0: not after a search)
    unsigned dip_rounds_ = 0;
    unsigned capped_rounds_ = 0;
    std::deque<std::pair<uint64_t, uint64_t>> sent_window_; // sent, retransmitted per capped round
    std::deque<double> rtt_window_;                          // their queue_rtt
    double lost_rtt_ = 0;
    double trim_ = 1.0;
    unsigned trims_ = 0, trim_settle_left_ = 0, measured_rounds_ = 0;
    double trim_share_ = 0, trim_rtt_ = 0;
    bool lifted_ = false;
    double lost_share_ = 0;
    double capped_at_ = 0;      // the best aggregate when the caps began
    unsigned capped_moving_ = 0; // streams moving then
    std::deque<double> rate_window_; // judged rounds' aggregate, kJudgeRounds at most
    bool held_back_ = false;
    unsigned rearms_ = 0;
    double held_share_ = 0;
    unsigned probe_rtt_left_ = 0;  // rounds still not judged after a stream was in PROBE_RTT
    unsigned probe_rtt_rounds_ = 0;
};

// Each moving stream's cap from the round's budget (the aggregate's best times the cycle's gain,
// what PaceModel::round() gives each of the moving streams times their count): split evenly,
// except that a stream whose demand (what it could take: PaceModel::kRoom times its best round
// of the window) is under its even share gets its demand, and what it leaves is split among the
// others, the largest share that fits the budget (max-min fairness). demand[i] < 0: stream i is
// not in the split (caps[i] untouched). The caps never sum above the budget, as even shares do.
// Why not even shares (measured at 80 ms, 100 Mbit/s): streams that begin while the pipe is
// already full (--streams auto adding 8 to 8) leave BBR's start-up with a small estimate of their
// own and do not use an even share, the aggregate falls under the caps, the window's best with
// it, and every cap after it: 16 streams slid to 33% of the 95.5 Mbit/s they began at in 22
// rounds (h16m) and the held-back rule lifted the caps for good (14% retransmitted after).
void share_caps(double budget, std::span<const double> demand, std::span<uint64_t> caps);

} // namespace sluice
