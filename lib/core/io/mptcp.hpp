#pragma once
// Multipath TCP (--mptcp, issue 16): sockets that can spread one connection over several
// paths and survive losing one. Asking is never a promise: the kernel may lack MPTCP or have it
// off (net.mptcp.enabled=0), and the peer or a middlebox may answer in plain TCP. Then the
// connection carries on over TCP and each connection's outcome is reported with its reason
// (Stats::mptcp_connections, -v): never a silent fallback.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "sluice/stats.hpp"

namespace sluice {

// Why a connection that asked for MPTCP runs plain TCP; errno is mapped here once.
enum class MptcpMiss {
    none,          // it runs MPTCP
    not_built,     // socket(IPPROTO_MPTCP): EPROTONOSUPPORT, the kernel has no MPTCP
    disabled,      // socket(IPPROTO_MPTCP): ENOPROTOOPT, net.mptcp.enabled=0 in this namespace
    refused,       // socket(IPPROTO_MPTCP) failed otherwise (the errno is in the text)
    peer_plain,    // connected, but the peer answered in plain TCP (it or the path lacks MPTCP)
    accepted_plain // accepted from a peer that connected in plain TCP (it did not ask, or the path stripped it)
};

// A SOCK_STREAM socket of `family`: MPTCP when `mptcp` and the kernel gives one, else TCP
// (the reason is found again per connection by mptcp_of()). Invalid, with errno set, when the
// kernel gives no socket at all (the family is not available).
UniqueFd stream_socket(int family, bool mptcp);

// What one connection became; `stream` 0 is the control connection. `asked`: it was made
// with --mptcp; `accepted`: this side accepted it (else connected it).
ConnectionMptcp mptcp_of(int fd, unsigned stream, bool asked, bool accepted);
// MPTCP subflows fd has now (MPTCP_INFO), 0 for TCP or where the kernel cannot say.
unsigned mptcp_subflows(int fd) noexcept;

// What the kernel says about an MPTCP connection as a whole (issue 16). TCP_INFO on an MPTCP
// socket describes its first subflow only: with a second path its figures (bytes sent and
// acknowledged, retransmits, delivery rate) miss everything the other subflows carried, and
// the governor, the pacer, tcp_streams and window_limits would judge that part of the traffic.
// nullopt for a plain TCP socket, and for an MPTCP socket that fell back to TCP (where
// TCP_INFO describes the one connection there is).
// Every subflow's TCP_INFO (MPTCP_TCPINFO) summed: bytes, retransmits, delivery rate and cwnd
// added; rtt the largest; busy and limited times the largest; StreamTcp::subflows the count.
std::optional<StreamTcp> mptcp_stream_tcp(int fd, unsigned stream);
// Bytes the peer acknowledged at the MPTCP level (mptcp_info's bytes_acked, Linux 6.7+; else
// the subflows' acknowledged bytes summed).
std::optional<uint64_t> mptcp_bytes_acked(int fd) noexcept;
// fd's connection runs MPTCP now (TCP_IS_MPTCP): false for TCP and for a fallback.
bool runs_mptcp(int fd) noexcept;

// Stats::mptcp's word for a set of connections: "on" (all MPTCP), "fallback" (some or all TCP).
std::string mptcp_summary(const std::vector<ConnectionMptcp>& connections);
// The -v line for one connection ("mptcp: data stream 2: plain TCP: ...").
std::string mptcp_line(const ConnectionMptcp& c);

} // namespace sluice
