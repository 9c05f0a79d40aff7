#include <doctest/doctest.h>

#include "send/session/pace_model.hpp"

#include <algorithm>
#include <cmath>

using namespace sluice;

// The pacer told the bottleneck's queue overflowing under its caps from the path's own loss
// (issue 16, h16r): rates in bytes per second, queue_rtt the streams' round trip over its lowest.
namespace {
// Growth to a full pipe at 100e6 over 8 streams with nothing lost: capped from the last call on.
void full(PaceModel& m) {
    for (double r : {10e6, 40e6, 90e6, 100e6, 100e6}) m.round(r, 8, 1'000'000, 0, 0, 0, 1.0);
    REQUIRE(m.round(100e6, 8, 1'000'000, 0, 0, 0, 1.0) > 0);
    REQUIRE(m.full());
}
// Rounds of 100e6 sending 1e6 bytes with retrans of them resent and the round trip at rtt.
uint64_t rounds(PaceModel& m, unsigned count, uint64_t retrans, double rtt) {
    uint64_t last = 0;
    for (unsigned i = 0; i < count; ++i) last = m.round(100e6, 8, 1'000'000, retrans, 0, 0, rtt);
    return last;
}
constexpr unsigned kToJudge = PaceModel::kSettleRounds + PaceModel::kJudgeRounds;
} // namespace

TEST_CASE("loss with a standing queue lowers the caps a step; the same loss with no queue lifts them") {
    SUBCASE("round trip at 2x its lowest (the one-BDP queue full): lowered, not lifted") {
        PaceModel m;
        full(m);
        CHECK(rounds(m, kToJudge, 10'000, 2.0) > 0);
        CHECK_FALSE(m.lifted());
        CHECK(m.trims() == 1);
        CHECK(m.trim() == doctest::Approx(PaceModel::kTrimStep));
        CHECK(m.trim_share() == doctest::Approx(0.01));
        CHECK(m.trim_rtt() == doctest::Approx(2.0));
    }
    SUBCASE("round trip at its lowest: the path's own loss, lifted as before, and said so") {
        PaceModel m;
        full(m);
        rounds(m, kToJudge, 10'000, 1.02);
        CHECK(m.lifted());
        CHECK(m.trims() == 0);
        CHECK(m.lost_share() == doctest::Approx(0.01));
        CHECK(m.lost_rtt() == doctest::Approx(1.02));
    }
    SUBCASE("round trip unknown (0): lifted as before") {
        PaceModel m;
        full(m);
        rounds(m, kToJudge, 10'000, 0);
        CHECK(m.lifted());
    }
}

TEST_CASE("steps down while the queue stands and loss goes on, then lifts at the floor: random loss is never capped for long") {
    PaceModel m;
    full(m);
    unsigned count = 0;
    while (!m.lifted() && count < 200) rounds(m, 1, 10'000, 2.0), ++count;
    CHECK(m.lifted());
    CHECK(m.trim() == doctest::Approx(PaceModel::kTrimFloor));
    // 0.95^3 = 0.857, then the floor: four steps, each a settle and a judged window
    CHECK(m.trims() == 4);
    CHECK(count <= kToJudge + 4 * (PaceModel::kTrimSettleRounds + PaceModel::kJudgeRounds));
}

TEST_CASE("loss that stops under lowered caps keeps them; clean windows raise them back a step at a time") {
    PaceModel m;
    full(m);
    const uint64_t before = rounds(m, kToJudge - 2, 10'000, 2.0); // full()'s last round was the first capped
    REQUIRE(m.trims() == 0);
    rounds(m, 1, 10'000, 2.0);
    REQUIRE(m.trims() == 1);
    // the same gain phase eight rounds on (the step's round, six, this one): the cap is the step lower
    rounds(m, std::size(PaceModel::kGains) - 2, 0, 1.1);
    const uint64_t after = m.round(100e6, 8, 1'000'000, 0, 0, 0, 1.1);
    CHECK(static_cast<double>(after) == doctest::Approx(static_cast<double>(before) * PaceModel::kTrimStep).epsilon(0.01));
    rounds(m, 10 * PaceModel::kJudgeRounds, 0, 1.1);
    CHECK_FALSE(m.lifted());
    CHECK(m.trim() == doctest::Approx(1.0));
}

TEST_CASE("the caps are based on the rate the queued rounds delivered, not on the window's noisy best") {
    PaceModel m;
    full(m);
    // rounds that read 108e6 and 92e6 in turn while the queue stood: the bottleneck's rate is 100e6
    uint64_t per = 0;
    for (unsigned i = 0; i < 2 * std::size(PaceModel::kGains); ++i)
        per = m.round(i % 2 ? 92e6 : 108e6, 8, 1'000'000, 0, 0, 0, 1.6);
    const unsigned phase = (1 + 2 * std::size(PaceModel::kGains) - 1) % std::size(PaceModel::kGains);
    CHECK(static_cast<double>(per) == doctest::Approx(100e6 * PaceModel::kGains[phase] / 8).epsilon(0.001));
    CHECK(m.measured_rounds() > 0);
    // but never under kLeastBase of the best: a round trip a busy host stretched does not drag the caps down
    PaceModel h;
    full(h);
    for (unsigned i = 0; i < 2 * std::size(PaceModel::kGains); ++i) per = h.round(i % 2 ? 70e6 : 100e6, 8, 1'000'000, 0, 0, 0, 1.6);
    CHECK(static_cast<double>(per) == doctest::Approx(100e6 * PaceModel::kLeastBase * PaceModel::kGains[phase] / 8).epsilon(0.001));
}

TEST_CASE("loss while the rate grew with the queue standing is start-up's overshoot: capped and judged, not lifted") {
    PaceModel m;
    for (double r : {10e6, 40e6, 90e6}) m.round(r, 8, 1'000'000, 50'000, 0, 0, 1.9);
    for (int i = 0; i < 3; ++i) m.round(100e6, 8, 1'000'000, 50'000, 0, 0, 1.9);
    CHECK(m.full());
    CHECK_FALSE(m.lifted());
    // with no queue the same loss is the path's: never capped, as before
    PaceModel p;
    for (double r : {10e6, 40e6, 90e6}) p.round(r, 8, 1'000'000, 50'000, 0, 0, 1.05);
    for (int i = 0; i < 3; ++i) p.round(100e6, 8, 1'000'000, 50'000, 0, 0, 1.05);
    CHECK(p.lifted());
    CHECK(p.lost_rtt() == doctest::Approx(1.05));
}

namespace {
// A closed loop of 8 streams and the model over one bottleneck, deterministic. Units: one round
// is the path's lowest round trip, so the one-BDP queue holds one round of the path's rate. The
// streams send what the caps allow (8 x the model's per-stream cap), before any cap (or after
// they are lifted) 10% over the path as unpaced BBR streams do; the queue overflows past its
// size (what the streams resend), the path drops `random` of what is sent on its own, and each
// round's delivered rate reads up to 8% off (rounds of ACK bursts): the window's best sits above
// the path. rtt_known false: the model as before h16r (no queue signal).
struct Loop {
    PaceModel model;
    double goodput = 0;  // delivered, mean of the last 100 rounds
    double resent = 0;   // resent share of the bytes sent in the last 100 rounds
    unsigned lifted_at = 0;
};
Loop run_path(double random, unsigned random_from, bool rtt_known, unsigned total = 400) {
    constexpr double kPath = 95e6, kQueue = kPath;
    constexpr double kNoise[8] = {0.08, -0.08, 0.04, -0.04, 0.0, 0.06, -0.06, 0.0};
    Loop l;
    double q = 0, sent_tail = 0, resent_tail = 0;
    uint64_t per = 0;
    for (unsigned r = 0; r < total; ++r) {
        const double unpaced = std::min(1.1 * kPath, 1e6 * std::pow(2.0, r));
        const double want = per ? static_cast<double>(per) * 8 : unpaced;
        const double avail = q + want;
        const double served = std::min(kPath, avail);
        q = avail - served;
        const double over = std::max(0.0, q - kQueue);
        q -= over;
        const double p = r >= random_from ? random : 0.0;
        const double resent = over + p * want;
        const double delivered = served * (1 - p);
        const double rtt = 1 + q / kPath;
        per = l.model.round(delivered * (1 + kNoise[r % 8]), 8, static_cast<uint64_t>(want), static_cast<uint64_t>(resent), 0, 0,
                            rtt_known ? rtt : 0);
        if (l.model.lifted() && !l.lifted_at) l.lifted_at = r;
        if (r + 100 >= total) l.goodput += delivered / 100, sent_tail += want, resent_tail += resent;
    }
    l.resent = resent_tail / sent_tail;
    return l;
}
} // namespace

TEST_CASE("closed loop, no random loss: the queue's overflow under the caps no longer lifts them") {
    const Loop before = run_path(0, 0, false);
    CHECK(before.model.lifted()); // h16o's runs at 20 ms: lifted, then ~9% resent unpaced
    CHECK(before.resent > 0.05);
    const Loop after = run_path(0, 0, true);
    CHECK_FALSE(after.model.lifted());
    CHECK(after.resent < 0.005);
    CHECK(after.goodput >= 0.9 * 95e6);
}

TEST_CASE("closed loop, random loss: lifted soon, at 1%, 5% and 14%, whether it began before the caps or under them") {
    for (double loss : {0.01, 0.05, 0.14}) {
        CAPTURE(loss);
        const Loop from_start = run_path(loss, 0, true);
        CHECK(from_start.model.lifted());
        CHECK(from_start.model.trims() <= 4);
        CHECK(from_start.lifted_at < 60);
        const Loop under_caps = run_path(loss, 30, true); // the caps set on a clean path, then it loses
        CHECK(under_caps.model.lifted());
        CHECK(under_caps.model.lost_share() >= PaceModel::kPathLoss);
        CHECK(under_caps.lifted_at < 30 + 60);
    }
}

// h16s: after the search settled below the count it measured last (16 -> 8 at 80 ms, 5% loss),
// the streams given back end their blocks and those kept regrow: the aggregate falls far under
// where the pacer began for a while. Those rounds are the count's change, not a full pipe.
TEST_CASE("after the search, rounds under half the rate it began at are not a full pipe; a bounded wait") {
    SUBCASE("the dip after the count changed: not capped at it, capped once the rate is back") {
        PaceModel m(true);
        CHECK(m.round(960e6, 15, 1'000'000, 0, 0, 0, 1.0) == 0); // seeds
        for (double r : {540e6, 314e6, 320e6, 310e6, 330e6, 315e6}) CHECK(m.round(r, 11, 1'000'000, 0, 0, 0, 1.0) == 0);
        CHECK_FALSE(m.full()); // the old rule: full at ~315e6 after three flat rounds
        CHECK(m.dip_rounds() == 5);
        for (double r : {600e6, 900e6, 950e6, 950e6, 950e6}) m.round(r, 8, 1'000'000, 0, 0, 0, 1.0);
        CHECK(m.full());
        const uint64_t cap = m.round(950e6, 8, 1'000'000, 0, 0, 0, 1.0);
        CHECK(cap * 8 > 0.9 * 950e6 * PaceModel::kGains[1]); // based on the regrown rate, not the dip
    }
    SUBCASE("a path that stays under half: judged full after kDipRounds, as before") {
        PaceModel m(true);
        m.round(960e6, 8, 1'000'000, 0, 0, 0, 1.0);
        unsigned n = 0;
        while (!m.full() && n < 100) m.round(300e6, 8, 1'000'000, 0, 0, 0, 1.0), ++n;
        CHECK(m.full());
        CHECK(m.dip_rounds() == PaceModel::kDipRounds);
        CHECK(n == PaceModel::kDipRounds + PaceModel::kFlatRounds);
    }
    SUBCASE("a dip above half is a full pipe as before (a ProbeBW cycle's drain is 0.75)") {
        PaceModel m(true);
        m.round(960e6, 8, 1'000'000, 0, 0, 0, 1.0);
        for (double r : {700e6, 700e6, 700e6}) m.round(r, 8, 1'000'000, 0, 0, 0, 1.0);
        CHECK(m.full());
        CHECK(m.dip_rounds() == 0);
    }
    SUBCASE("not after a search (a fixed count): no dip rule") {
        PaceModel m;
        for (double r : {960e6, 300e6, 300e6, 300e6}) m.round(r, 8, 1'000'000, 0, 0, 0, 1.0);
        CHECK(m.full());
        CHECK(m.dip_rounds() == 0);
    }
}
