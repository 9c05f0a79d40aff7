#pragma once
// TCP on long links: the congestion control a transfer asks for (TCP_CONGESTION on every
// connection) and what the kernel says about each data stream at the end (TCP_INFO), including
// whether a sysctl cap on the socket buffers held its window down.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/io/rtt_deadlines.hpp" // rtt_scaled_ms(), for the receiver's handshake deadline
#include "sluice/stats.hpp"

namespace sluice {

// Throws usage naming `name` and listing the kernel's available algorithms when a TCP socket
// refuses it. Tried on a probe socket, not read from the list: root may load a module that
// is not listed yet, and an unprivileged process may set only the allowed ones.
void check_congestion_control(const std::string& name);
// Sets TCP_CONGESTION on fd (nothing for an empty name); throws usage as above.
void set_congestion_control(int fd, const std::string& name);
// The algorithm fd uses, as the kernel names it ("" when it cannot say).
std::string congestion_control_of(int fd);

// Whether fd's BBR is still in its start-up (TCP_CC_INFO: a pacing gain above ProbeBW's highest,
// 5/4; start-up's is 2.77-2.89 by kernel version): BBR has not yet judged its own path full.
// False for another algorithm or where the kernel cannot say (an MPTCP socket).
bool in_bbr_startup(int fd) noexcept;
// Whether fd's BBR is in PROBE_RTT (TCP_CC_INFO: pacing and window gain both 1): for ~200 ms
// and a round trip every 10 s it keeps 4 packets in flight. False as above.
bool in_bbr_probe_rtt(int fd) noexcept;

// The kernel's smoothed round-trip time of fd's connection (TCP_INFO; for an accepted one,
// measured by its handshake), 0 where it cannot say.
uint32_t smoothed_rtt_us(int fd) noexcept;

// TCP_INFO of one data stream (zeros where the kernel lacks a field); of an MPTCP connection,
// its subflows' summed (mptcp_stream_tcp(), core/io/mptcp.hpp).
StreamTcp stream_tcp(int fd, unsigned stream);

// The sender's lines for window_limits: each data stream (fds[i] is stream i + 1) held back by
// its send buffer for a noticeable part of its busy time with the buffer grown to
// net.ipv4.tcp_wmem's max: that value, and the one that would lift the cap.
// Streams running MPTCP are not judged (the MPTCP socket's buffer is not what held each
// subflow back, and a subflow's share of the send buffer is not reported): *unjudged says
// which were left out and why ("" when none).
std::vector<std::string> send_window_limits(const std::vector<int>& fds, const std::vector<StreamTcp>& streams,
                                            std::string* unjudged);
// The receiver's lines: each data stream (number, fd) whose receive buffer autotuning grew
// to net.ipv4.tcp_rmem's max and that moved at least half of what a window of that size
// allows over `seconds` (the sender cannot read the receiver's sysctls). net.core.rmem_max
// and wmem_max cap only buffers set with SO_RCVBUF/SO_SNDBUF, which sluice leaves to autotuning.
// MPTCP streams are left out as at the sender (TCP_INFO of an MPTCP socket is its first
// subflow's: a second path's bytes would be missing from the rate judged).
std::vector<std::string> recv_window_limits(const std::vector<std::pair<unsigned, int>>& streams, double seconds,
                                            std::string* unjudged);

} // namespace sluice
