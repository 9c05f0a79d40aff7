#pragma once
// How much a data stream's socket may hold that TCP has not sent yet (TCP_NOTSENT_LOWAT), on a
// long path (issue 16, h16s). A stream takes its next block once the last one is written into
// its socket; with the send buffer left to autotuning (up to net.ipv4.tcp_wmem's max: four BDPs
// on bench/wan) a BBR stream's socket held ~5-12 MB unsent at 80 ms, 1 Gbit/s, so when the
// queue of blocks ran out each stream still had its own backlog to drain at its own rate, and
// the last second of a 1 GiB transfer ran at a fraction of the path (h16s: 84 MB in 1.6 s).
// Holding the unsent bytes to a bound makes a stream take a block only as the link drains it,
// so the last blocks are spread over the streams that are free and end close together.
// Below kMinRttUs (a LAN, loopback) nothing is set: there a stream moves gigabytes a second
// and a small backlog would run dry between two wake-ups of its thread on a busy host.
#include <cstdint>

namespace sluice {

inline constexpr uint32_t kSendBacklogBytes = 2u << 20;
inline constexpr uint32_t kSendBacklogMinRttUs = 2000; // StreamGovernor's and the pacer's threshold

// The bound for a path whose lowest round trip is path_us (0: leave the kernel's default, none).
// 2 MiB is 16 ms of a whole 1 Gbit/s path and 66 ms of a quarter of it: room for a busy host's
// late wake-up of the sending thread, a fifth of what autotuning let pile up.
constexpr uint32_t send_backlog_for(uint32_t path_us) noexcept {
    return path_us >= kSendBacklogMinRttUs ? kSendBacklogBytes : 0;
}

// Sets fd's bound for a path of path_us (its connection's lowest round trip so far, the SYN's:
// min_rtt_us() once connected); returns the bound set, 0 when none was (a short path, or the
// kernel refused: the stream then sends as before, a hint, not an error).
uint32_t set_send_backlog(int fd, uint32_t path_us) noexcept;
// The bound fd has (0: none, the kernel's default), for -v.
uint32_t send_backlog_of(int fd) noexcept;

} // namespace sluice
