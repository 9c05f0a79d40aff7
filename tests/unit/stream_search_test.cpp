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
