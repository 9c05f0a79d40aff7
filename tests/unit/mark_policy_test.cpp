// The per-stream low-water mark policy (recv/paths/mark_policy.hpp): when a stream waits under
// a mark, how large, and what it counts. Pure logic: no sockets, no time.
#include <doctest/doctest.h>

#include "recv/paths/mark_policy.hpp"

using sluice::MarkPolicy;

namespace {

// Receives with no new out-of-order packets until marks are back; returns how many it took.
unsigned until_marked(MarkPolicy& p, uint32_t ooo) {
    unsigned n = 0;
    while (p.cap(ooo) == 0 && n < 1000) ++n;
    return n;
}

} // namespace

TEST_CASE("a stream that shows no loss waits under the full mark from its first receive") {
    MarkPolicy p;
    CHECK(p.cap(0) == MarkPolicy::kMax);
    CHECK(p.cap(0) == MarkPolicy::kMax);
    CHECK(p.counts().unmarked_for_loss == 0);
}

TEST_CASE("out-of-order packets leave the next kQuiet receives unmarked, each counted") {
    MarkPolicy p;
    CHECK(p.cap(3) == 0);                                   // a hole opened: take what is there
    CHECK(until_marked(p, 3) == MarkPolicy::kQuiet - 1);    // then kQuiet - 1 more without one
    CHECK(p.cap(3) == MarkPolicy::kMax);
    CHECK(p.counts().unmarked_for_loss == MarkPolicy::kQuiet);
}

TEST_CASE("loss that goes on keeps the stream unmarked") {
    MarkPolicy p;
    for (uint32_t ooo = 1; ooo <= 100; ++ooo) {
        CHECK(p.cap(ooo) == 0);
        if (ooo % 3 == 0) CHECK(p.cap(ooo) == 0); // a quiet receive between losses does not restore it
    }
    CHECK(p.counts().unmarked_for_loss == 133);
}

TEST_CASE("a deadline halves the cap; below kMin the mark is given up, once") {
    MarkPolicy p;
    size_t expect = MarkPolicy::kMax;
    while (expect / 2 >= MarkPolicy::kMin) {
        p.deadline();
        expect /= 2;
        CHECK(p.cap(0) == expect);
    }
    CHECK(p.counts().given_up == 0);
    p.deadline();
    CHECK(p.cap(0) == 0);
    CHECK(p.counts().given_up == 1);
    p.deadline(); // a stream without a mark has no marked wait, but a stray one changes nothing
    CHECK(p.counts().given_up == 1);
    CHECK(p.counts().deadlines == 6);
}

TEST_CASE("a given-up mark comes back at kMin only when an unmarked receive found that much queued") {
    MarkPolicy p;
    for (int i = 0; i < 5; ++i) p.deadline();
    REQUIRE(p.cap(0) == 0);
    p.received(MarkPolicy::kMin - 1, false);
    CHECK(p.cap(0) == 0);
    p.received(MarkPolicy::kMin, false);
    CHECK(p.cap(0) == MarkPolicy::kMin);
}

TEST_CASE("a halved cap doubles after kRegrow marks met in a row, up to kMax; a deadline resets the run") {
    MarkPolicy p;
    p.deadline();
    p.deadline();
    REQUIRE(p.cap(0) == MarkPolicy::kMax / 4);
    for (unsigned i = 0; i + 1 < MarkPolicy::kRegrow; ++i) p.received(MarkPolicy::kMax / 4, true);
    p.deadline(); // the run is broken before it doubled
    CHECK(p.cap(0) == MarkPolicy::kMax / 8);
    for (unsigned i = 0; i < MarkPolicy::kRegrow; ++i) p.received(MarkPolicy::kMax / 8, true);
    CHECK(p.cap(0) == MarkPolicy::kMax / 4);
    for (unsigned i = 0; i < 10 * MarkPolicy::kRegrow; ++i) p.received(MarkPolicy::kMax, true);
    CHECK(p.cap(0) == MarkPolicy::kMax);
    p.received(0, false); // unmarked receives are no evidence for a mark that exists
    CHECK(p.cap(0) == MarkPolicy::kMax);
}
