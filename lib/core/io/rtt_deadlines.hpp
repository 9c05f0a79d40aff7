#pragma once
// Deadlines that scale with the round trip (issue 16). A fixed deadline set for a near peer
// breaks a far one: a 10 s connect-and-handshake is a few dozen round trips of a geostationary
// hop with a full queue, and a peer is only "silent" for as long as a few retransmission
// timeouts in a row last, which grow with the round trip (RTO >= RTT, doubled per loss).
// So each deadline is what the user (or the default) asked, the floor, or kDeadlineRtts
// round trips of the control connection (TCP_INFO's smoothed RTT, measured by its handshake)
// where that is longer, up to kDeadlineCeilingMs: one RTT sample taken in a queue spike must
// not turn a dead peer into an hour's wait.
#include <cstdint>
#include <string>

namespace sluice {

// 64 round trips: the exchange itself and about six back-to-back retransmission timeouts
// (1 + 2 + ... + 32 RTOs of at least one round trip each).
inline constexpr int kDeadlineRtts = 64;
// The most the scaling adds: 10 minutes (a floor above it is kept: it is the user's choice).
inline constexpr int kDeadlineCeilingMs = 600'000;

// floor_ms, or kDeadlineRtts x rtt_us where that is longer, at most max(floor_ms, ceiling).
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
// "deadlines: control connection RTT 100.3 ms; idle timeout 6.4 s (64 round trips; asked 2 s);
// data stream connect 10 s (asked; 64 round trips are 6.4 s)".
std::string deadlines_line(const RttDeadlines& d);

} // namespace sluice
