#include <doctest/doctest.h>

#include "core/io/rtt_deadlines.hpp"

using namespace sluice;

// Issue 16: deadlines that scale with the round trip, above the one asked, below a ceiling.
TEST_CASE("a deadline is the one asked or 64 RTOs of RTT + 200 ms, at most 10 minutes") {
    CHECK(rtt_scaled_ms(10000, 0) == 10000);       // no measurement: the floor
    CHECK(rtt_scaled_ms(60000, 80'000) == 60000);  // 80 ms: 64 RTOs are 17.9 s, under the floor
    CHECK(rtt_scaled_ms(10000, 80'000) == 17920);  // ... and over a 10 s one
    CHECK(rtt_scaled_ms(10000, 600'000) == 51200); // 600 ms (a satellite hop): 64 x 0.8 s
    CHECK(rtt_scaled_ms(2000, 100'000) == 19200);  // 100 ms and a short floor: 19.2 s
    // 20 ms: RTOs of 220 ms at least, so six losses in a row need 63 x 0.22 = 13.9 s; 64 round
    // trips (the factor before session 13) were 1.3 s, under two losses in a row
    CHECK(rtt_scaled_ms(2000, 20'000) == 14080);
    CHECK(rtt_scaled_ms(10000, 4'000'000'000u) == kDeadlineCeilingMs); // one wild sample: 10 minutes
    CHECK(rtt_scaled_ms(3'600'000, 4'000'000'000u) == 3'600'000);     // a floor above the ceiling is kept
    CHECK(rtt_scaled_ms(0, 500'000) == 0);                             // none asked: none made up
}

TEST_CASE("a transfer's deadlines and the line that says them") {
    RttDeadlines near = rtt_deadlines(10000, 60000, 50);
    CHECK(near.connect_ms == 10000); // a LAN keeps what was asked (64 round trips there: 3 ms)
    CHECK(near.idle_ms == 60000);
    CHECK(deadlines_line(near).find("idle timeout 60 s (asked; 64 round trips are") != std::string::npos);
    CHECK(deadlines_line(near).find("data stream connect 10 s (asked;") != std::string::npos);
    CHECK(rtt_scaled_ms(1000, 1999) == 1000);  // under 2 ms: the floor, however short
    CHECK(rtt_scaled_ms(1000, 2000) == 12928); // from 2 ms: 64 x 202 ms

    RttDeadlines far = rtt_deadlines(10000, 2000, 200'000); // 200 ms round trip, --idle-timeout 2
    CHECK(far.rtt_us == 200'000);
    CHECK(far.idle_ms == 25600);
    CHECK(far.connect_ms == 25600);
    const std::string line = deadlines_line(far);
    CHECK(line.find("control connection RTT 200.0 ms") != std::string::npos);
    CHECK(line.find("idle timeout 25.6 s (64 RTOs of RTT + 200 ms; asked 2 s)") != std::string::npos);

    RttDeadlines receiver = rtt_deadlines(0, 60000, 0); // a receiver connects nothing
    CHECK(receiver.connect_ms == 0);
    CHECK(deadlines_line(receiver).find("RTT not measured") != std::string::npos);
    CHECK(deadlines_line(receiver).find("data stream connect") == std::string::npos);

    RttDeadlines wild = rtt_deadlines(10000, 60000, 30'000'000); // a 30 s sample: capped
    CHECK(wild.idle_ms == kDeadlineCeilingMs);
    CHECK(deadlines_line(wild).find("(the ceiling;") != std::string::npos);
}
