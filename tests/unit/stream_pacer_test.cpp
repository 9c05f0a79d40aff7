#include <doctest/doctest.h>

#include "send/session/stream_pacer.hpp"

using namespace sluice;

// Pacing the streams together (issue 16), rates in bytes per second.
TEST_CASE("nothing is capped while the aggregate grows") {
    PaceModel m;
    double rate = 1e6;
    for (int i = 0; i < 20; ++i, rate *= 1.5) CHECK(m.round(rate, 8) == 0);
    CHECK_FALSE(m.full());
}

TEST_CASE("once the aggregate stops growing each moving stream gets its share, probing in a cycle") {
    PaceModel m;
    CHECK(m.round(10e6, 8) == 0);
    CHECK(m.round(40e6, 8) == 0);
    CHECK(m.round(80e6, 8) == 0);
    // three rounds under 1.25x the last growth: the pipe is full on the third
    CHECK(m.round(90e6, 8) == 0);
    CHECK(m.round(85e6, 8) == 0);
    const uint64_t first = m.round(95e6, 8);
    CHECK(m.full());
    // best over the window is 95e6: the cycle starts with the probe (1.25), then the drain (0.75)
    CHECK(first == static_cast<uint64_t>(95e6 * 1.25 / 8));
    CHECK(m.round(60e6, 8) == static_cast<uint64_t>(95e6 * 0.75 / 8));
    for (size_t i = 2; i < std::size(PaceModel::kGains); ++i)
        CHECK(m.round(90e6, 8) == static_cast<uint64_t>(95e6 * PaceModel::kGains[i] / 8));
    CHECK(m.round(90e6, 8) == static_cast<uint64_t>(95e6 * 1.25 / 8)); // the cycle again
}

TEST_CASE("the share follows the streams that move and the best ages out of the window") {
    PaceModel m;
    for (double r : {50e6, 100e6, 100e6, 100e6, 100e6}) m.round(r, 4);
    CHECK(m.full());
    // one stream left with work (the end of a transfer): it may take the whole best
    CHECK(m.round(30e6, 1) == static_cast<uint64_t>(100e6 * PaceModel::kGains[1]));
    // a path that got slower: after kWindowRounds rounds the old best is gone
    uint64_t last = 0;
    for (unsigned i = 0; i < PaceModel::kWindowRounds; ++i) last = m.round(40e6, 2);
    const unsigned phase = (2 + PaceModel::kWindowRounds - 1) % std::size(PaceModel::kGains);
    CHECK(last == static_cast<uint64_t>(40e6 * PaceModel::kGains[phase] / 2));
    CHECK(m.round(10e6, 0) == 0); // no stream moved: no decision
}
