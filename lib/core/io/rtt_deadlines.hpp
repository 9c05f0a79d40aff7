#pragma once
// Deadlines that scale with the round trip (issue 16). A fixed deadline set for a near peer
// breaks a far one: a 10 s connect-and-handshake is a few dozen round trips of a geostationary
// hop with a full queue, and a peer is only "silent" for as long as a few retransmission
// timeouts in a row last, which grow with the round trip (RTO >= RTT + 200 ms on Linux,
// doubled per loss). So each deadline is what the user (or the default) asked, the floor, or
// kDeadlineRtos retransmission timeouts of the control connection (TCP_INFO's smoothed RTT,
// measured by its handshake, plus kRtoFloorUs) where that is longer, up to
// kDeadlineCeilingMs: one RTT sample taken in a queue spike must not turn a dead peer into an
// hour's wait.
#include <cstdint>
#include <string>

namespace sluice {

// 64 retransmission timeouts: the exchange itself and six back-to-back losses of one segment
// (1 + 2 + ... + 32 RTOs). Until session 13 this was 64 round trips, which assumed RTO = RTT:
// Linux's RTO is at least the smoothed RTT plus 200 ms (TCP_RTO_MIN as the variance floor),
// so at 20 ms 64 round trips (1.3 s) outlasted only two losses in a row (0.22 + 0.44 s, then
// 0.88 s more). Measured through bench/wan at 14% loss each way (bench/wan/silence.py;
// docs/benchmarks.md, "Issue 16 (h16g, session 13)"): of ~27,000 silences of live connections
// writing every 0.5 s at 20, 80 and 150 ms, 94 outlasted 64 round trips and 4 outlast 64 RTOs.
inline constexpr int kDeadlineRtos = 64;
// What Linux adds to the smoothed RTT in its RTO at the least (TCP_RTO_MIN).
inline constexpr uint32_t kRtoFloorUs = 200'000;
// Below this round trip (a LAN, loopback) the deadline asked is kept as it was chosen for that
// network, and the scaling is 64 round trips as before: 64 RTOs would be 12.8 s there, over
// the 10 s connect default and any short --idle-timeout, on paths that rarely lose a segment.
inline constexpr uint32_t kRtoScaleMinRttUs = 2000;
// The most the scaling adds: 10 minutes (a floor above it is kept: it is the user's choice).
inline constexpr int kDeadlineCeilingMs = 600'000;

// floor_ms, or kDeadlineRtos x (rtt_us + kRtoFloorUs) where that is longer (from
// kRtoScaleMinRttUs on; below, kDeadlineRtos x rtt_us), at most max(floor_ms, ceiling).
// rtt_us 0 (no measurement): the floor. floor_ms 0 (no deadline) stays 0.
int rtt_scaled_ms(int floor_ms, uint32_t rtt_us) noexcept;

// The deadlines of one transfer, chosen once the control connection is up (Stats fields of
// the same names, and the -v line deadlines_line()).
struct RttDeadlines {
    uint32_t rtt_us = 0;       // the control connection's smoothed RTT when chosen (0: not measured)
    int connect_floor_ms = 0;  // as asked (--connect-timeout's default; the library's option)
    int idle_floor_ms = 0;     // as asked (--idle-timeout)
    int connect_ms = 0;        // a data stream's connect (and reopen); 0 where this side connects nothing
    int idle_ms = 0;           // the peer's silence that fails the transfer
};
// connect_floor_ms 0: this side opens no connection (a receiver); connect_ms stays 0.
RttDeadlines rtt_deadlines(int connect_floor_ms, int idle_floor_ms, uint32_t rtt_us) noexcept;
// "deadlines: control connection RTT 100.3 ms; idle timeout 19.2 s (64 RTOs of RTT + 200 ms;
// asked 2 s); data stream connect 19.2 s (64 RTOs of RTT + 200 ms; asked 1 s)".
std::string deadlines_line(const RttDeadlines& d);

} // namespace sluice
