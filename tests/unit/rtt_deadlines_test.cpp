#include <doctest/doctest.h>

#include "core/io/rtt_deadlines.hpp"

using namespace sluice;

// Issue 16: deadlines that scale with the round trip, above the one asked, below a ceiling.
TEST_CASE("a deadline is the one asked or 64 round trips, at most 10 minutes") {
    CHECK(rtt_scaled_ms(10000, 0) == 10000);       // no measurement: the floor
    CHECK(rtt_scaled_ms(10000, 80'000) == 10000);  // 80 ms: 64 round trips are 5.1 s, under the floor
    CHECK(rtt_scaled_ms(10000, 600'000) == 38400); // 600 ms (a satellite hop): 64 round trips
    CHECK(rtt_scaled_ms(2000, 100'000) == 6400);   // 100 ms and a short floor: 6.4 s
    CHECK(rtt_scaled_ms(10000, 4'000'000'000u) == kDeadlineCeilingMs); // one wild sample: 10 minutes
    CHECK(rtt_scaled_ms(3'600'000, 4'000'000'000u) == 3'600'000);     // a floor above the ceiling is kept
    CHECK(rtt_scaled_ms(0, 500'000) == 0);                             // none asked: none made up
}

TEST_CASE("a transfer's deadlines and the line that says them") {
    RttDeadlines near = rtt_deadlines(10000, 60000, 50);
    CHECK(near.connect_ms == 10000);
    CHECK(near.idle_ms == 60000);
    CHECK(deadlines_line(near).find("idle timeout 60 s (asked;") != std::string::npos);
    CHECK(deadlines_line(near).find("data stream connect 10 s (asked;") != std::string::npos);

    RttDeadlines far = rtt_deadlines(10000, 2000, 200'000); // 200 ms round trip, --idle-timeout 2
    CHECK(far.rtt_us == 200'000);
    CHECK(far.idle_ms == 12800);
    CHECK(far.connect_ms == 12800);
    const std::string line = deadlines_line(far);
    CHECK(line.find("control connection RTT 200.0 ms") != std::string::npos);
    CHECK(line.find("idle timeout 12.8 s (64 round trips; asked 2 s)") != std::string::npos);

    RttDeadlines receiver = rtt_deadlines(0, 60000, 0); // a receiver connects nothing
    CHECK(receiver.connect_ms == 0);
    CHECK(deadlines_line(receiver).find("RTT not measured") != std::string::npos);
    CHECK(deadlines_line(receiver).find("data stream connect") == std::string::npos);

    RttDeadlines wild = rtt_deadlines(10000, 60000, 30'000'000); // a 30 s sample: capped
    CHECK(wild.idle_ms == kDeadlineCeilingMs);
    CHECK(deadlines_line(wild).find("(the ceiling;") != std::string::npos);
}
