#include <doctest/doctest.h>

#include "send/session/stream_search.hpp"

using namespace sluice;

// --streams auto's decision (issue 16), rates in bytes per second.
TEST_CASE("the count doubles while the rate grows and stops at the streams opened") {
    StreamSearch s(2, 16);
    double rate = 10e6;
    for (unsigned want : {4u, 8u, 16u}) {
        auto step = s.measured(rate, 0.01);
        CHECK_FALSE(step.done);
        CHECK(step.count == want);
        rate *= 1.8;
    }
    auto last = s.measured(rate, 0.01);
    CHECK(last.done);
    CHECK(last.count == 16);
    CHECK(last.why == "still growing at the most streams opened");
    CHECK(s.steps().find("2 streams 80.0 Mbit/s retrans 1.00%") == 0);
}

TEST_CASE("a doubling that brings less than 10% more keeps the faster count") {
    StreamSearch s(2, 16);
    CHECK(s.measured(50e6, 0.0).count == 4);
    auto step = s.measured(53e6, 0.0); // +6%
    CHECK(step.done);
    CHECK(step.count == 4);
    CHECK(step.why == "4 streams gave less than 10% more than 2");
    StreamSearch t(2, 16);
    t.measured(50e6, 0.0);
    step = t.measured(45e6, 0.0); // slower, retransmits unchanged
    CHECK(step.done);
    CHECK(step.count == 2);
    CHECK(step.why == "4 streams gave no more than 2");
}

TEST_CASE("streams that only add retransmits are given back") {
    StreamSearch s(2, 64);
    s.measured(10e6, 0.01);
    s.measured(20e6, 0.01); // 4
    auto step = s.measured(19e6, 0.05); // 8: no more rate, five times the retransmits
    CHECK(step.done);
    CHECK(step.count == 4);
    CHECK(step.why == "8 streams gave no more than 4, only more retransmits");
}

TEST_CASE("a start above the streams opened is clamped; one stream is its own answer") {
    StreamSearch s(8, 3);
    CHECK(s.current() == 3);
    auto step = s.measured(1e6, 0);
    CHECK(step.done);
    CHECK(step.count == 3);
    StreamSearch one(2, 1);
    CHECK(one.current() == 1);
}

TEST_CASE("a count is measured again while its rate still grows, and judged once it stops or after kRampPeriods") {
    // 4 BBR streams at 80 ms: 36 Mbit/s in their first period (start-up), 96 in the next.
    CHECK(StreamSearch::still_ramping(0, 4.5e6, 1));      // one period: nothing to compare with yet
    CHECK(StreamSearch::still_ramping(4.5e6, 12e6, 2));   // grew 2.7x: still in start-up
    CHECK_FALSE(StreamSearch::still_ramping(12e6, 12.2e6, 3)); // +2%: out of it, judged on this one
    CHECK_FALSE(StreamSearch::still_ramping(12e6, 11e6, 2));
    // a lossy path whose rate keeps creeping up is judged after kRampPeriods periods all the same
    CHECK_FALSE(StreamSearch::still_ramping(1e6, 2e6, StreamSearch::kRampPeriods));
}

TEST_CASE("a count whose round trip stands kQueued above the path's lowest ends the search: the bottleneck is full") {
    // h16n, 80 ms, 100 Mbit/s, no random loss: 4 BBR streams moved 95 Mbit/s, and the search
    // on to 8 and 16 streams retransmitted 14-18% while it went on.
    StreamSearch s(4, 16);
    auto step = s.measured(11.9e6, 0.15, 1.6);
    CHECK(step.done);
    CHECK(step.count == 4);
    CHECK(step.why.find("the bottleneck is full at 4 streams") == 0);
    CHECK(s.steps().find("round trip 1.60x the lowest") != std::string::npos);
    // a queue under the mark, or none known: the search goes on as before
    StreamSearch t(4, 16);
    CHECK_FALSE(t.measured(11.9e6, 0.05, 1.1).done);
    CHECK_FALSE(t.measured(30e6, 0.05, 0).done);
    // once a doubling brought no more, the earlier count stays whatever the queue says
    StreamSearch u(4, 16);
    CHECK(u.measured(40e6, 0.05, 1.0).count == 8);
    step = u.measured(41e6, 0.05, 1.5);
    CHECK(step.done);
    CHECK(step.count == 8);
    CHECK(step.why == "8 streams gave less than 10% more than 4");
}

TEST_CASE("a period in which the streams moved less than an initial window each is not measured") {
    // h16o: "4 streams 0.0 Mbit/s" was judged at 150 ms and the search went on to 8 streams.
    CHECK_FALSE(StreamSearch::had_work(0, 4));
    CHECK_FALSE(StreamSearch::had_work(StreamSearch::kWorkBytesPerStream * 4 - 1, 4));
    CHECK(StreamSearch::had_work(StreamSearch::kWorkBytesPerStream * 4, 4));
    CHECK(StreamSearch::had_work(StreamSearch::kWorkBytesPerStream, 1));
    CHECK(StreamSearch::had_work(StreamSearch::kWorkBytesPerStream, 0)); // never a count of 0
}

namespace {

// Feeds one count's periods (Mbit/s, retransmitted share of each) to s as the governor does.
StreamSearch::Step count_measured(StreamSearch& s, std::initializer_list<double> mbit, double retrans) {
    StreamSearch::Periods p;
    bool again = true;
    for (double m : mbit) {
        REQUIRE(again); // the series is no longer than the search would measure
        const double rate = m * 1e6 / 8;
        again = p.add(rate, static_cast<uint64_t>(rate), static_cast<uint64_t>(rate * retrans));
    }
    REQUIRE_FALSE(again); // and not shorter
    return s.measured(p);
}

} // namespace

TEST_CASE("spread() is how far two periods stood apart over their mean; the growth needed is kGrowth or that") {
    CHECK(StreamSearch::spread(0, 0) == 0);
    CHECK(StreamSearch::spread(100, 100) == 0);
    CHECK(StreamSearch::spread(120, 180) == doctest::Approx(0.4));
    CHECK(StreamSearch::spread(180, 120) == doctest::Approx(0.4));
    CHECK(StreamSearch::needed_growth(0, 0) == doctest::Approx(StreamSearch::kGrowth));
    CHECK(StreamSearch::needed_growth(0.05, 0.02) == doctest::Approx(StreamSearch::kGrowth));
    CHECK(StreamSearch::needed_growth(0.4, 0.1) == doctest::Approx(1.4));
    CHECK(StreamSearch::needed_growth(0.1, 0.3) == doctest::Approx(1.3));
}

TEST_CASE("a count's periods: measured again while they grow, judged on the mean of the last two") {
    // 4 BBR streams leaving start-up at 80 ms: 36, 96, 98 Mbit/s (bytes/s below), 1-2% resent.
    StreamSearch::Periods p;
    CHECK(p.add(4.5e6, 5'000'000, 100'000));   // one period: nothing to compare with
    CHECK(p.add(12e6, 13'000'000, 130'000));   // 2.7x: still in start-up
    CHECK_FALSE(p.add(12.25e6, 13'000'000, 260'000)); // +2%: judged
    CHECK(p.count() == 3);
    CHECK(p.rate() == doctest::Approx(12.125e6));
    CHECK(p.noise() == doctest::Approx(0.25e6 / 12.125e6));
    CHECK(p.retrans() == doctest::Approx(390'000.0 / 26'000'000)); // the last two periods only
    // still growing after kRampPeriods: judged all the same, on its last period (a ramp, not noise)
    StreamSearch::Periods q;
    for (double r : {1e6, 2e6, 4e6}) CHECK(q.add(r, 1'000'000, 0));
    CHECK_FALSE(q.add(8e6, 1'000'000, 0));
    CHECK(q.count() == StreamSearch::kRampPeriods);
    CHECK(q.rate() == doctest::Approx(8e6));
    CHECK(q.noise() == 0);
    // up and down again: the last two periods' mean and spread
    StreamSearch::Periods u;
    CHECK(u.add(10e6, 1, 0));
    CHECK(u.add(20e6, 1, 0));
    CHECK_FALSE(u.add(12e6, 1, 0));
    CHECK(u.rate() == doctest::Approx(16e6));
    CHECK(u.noise() == doctest::Approx(0.5));
}

TEST_CASE("a count still ramping when judged is no noise: the next doubling's real gain is not refused") {
    // h16q Q150a (150 ms, 14% loss): 4 streams' periods still rising when judged (the last two
    // 81% apart), 8 streams 58% above their mean; read as noise the search went back to 4.
    StreamSearch s(4, 16);
    StreamSearch::Periods four;
    for (double m : {60.0, 110.0, 190.0}) CHECK(four.add(m * 1e6 / 8, 1'000'000, 135'000));
    CHECK_FALSE(four.add(345e6 / 8, 1'000'000, 135'000));
    CHECK(four.noise() == 0);
    CHECK(s.measured(four).count == 8);
    auto step = count_measured(s, {500, 480}, 0.13); // +42% over 4's last period, 4% apart
    CHECK_FALSE(step.done);
    CHECK(step.count == 16);
}


TEST_CASE("at 14% loss a doubling whose gain is within the noise between one count's periods is refused") {
    // 150 ms, 14% random loss, bbr: 4 streams' periods jump 180 -> 120 Mbit/s with the count
    // unchanged; 8 give 200 and 170: +23% on the means, which one period each would have read
    // as growth (judged on 120 and 170, +42%) and gone on to 16.
    StreamSearch s(4, 16);
    auto step = count_measured(s, {180, 120}, 0.135);
    CHECK_FALSE(step.done);
    CHECK(step.count == 8);
    CHECK(s.steps() == "4 streams 150.0 Mbit/s (periods 40% apart) retrans 13.50%");
    step = count_measured(s, {200, 170}, 0.16);
    CHECK(step.done);
    CHECK(step.count == 4); // back to the smaller count
    CHECK(step.why == "8 streams gave 23% more than 4, within the noise between one count's periods (40%), "
                      "with more retransmits (16.00% against 13.50%)");
    // the same last periods judged one by one, as before: the search went on
    StreamSearch old(4, 16);
    CHECK(old.measured(120e6 / 8, 0.135).count == 8);
    CHECK_FALSE(old.measured(170e6 / 8, 0.16).done);
}

TEST_CASE("the larger count's own noise counts too, and growth beyond the noise still doubles") {
    StreamSearch s(4, 16);
    CHECK(count_measured(s, {100, 100}, 0.01).count == 8);
    auto step = count_measured(s, {150, 90}, 0.01); // +20% on the means, 50% apart
    CHECK(step.done);
    CHECK(step.count == 4);
    CHECK(step.why == "8 streams gave 20% more than 4, within the noise between one count's periods (50%)");
    // h16q B150a (150 ms, 14%): fixed 16 streams moved a median 325 Mbit/s against 4's 176, and
    // the search's counts 164 -> 279 -> 474: real growth, far beyond 30% noise, reaches 16.
    StreamSearch t(4, 16);
    CHECK(count_measured(t, {188, 140}, 0.14).count == 8);
    CHECK(count_measured(t, {307, 250}, 0.13).count == 16);
    step = count_measured(t, {527, 420}, 0.14);
    CHECK(step.done);
    CHECK(step.count == 16);
    CHECK(step.why == "still growing at the most streams opened");
}

TEST_CASE("with little noise a doubling is judged as before: kGrowth, the faster of the two") {
    StreamSearch s(4, 16);
    CHECK(count_measured(s, {400, 410}, 0.05).count == 8); // 2% apart
    auto step = count_measured(s, {430, 436}, 0.05);       // +6%
    CHECK(step.done);
    CHECK(step.count == 8);
    CHECK(step.why == "8 streams gave less than 10% more than 4");
}
