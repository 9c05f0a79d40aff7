// MPTCP connections as a whole (core/io/mptcp.hpp): the figures TCP_INFO gives for one TCP
// connection, gathered from every subflow, and MPTCP's own acknowledged bytes.
#include <linux/mptcp.h> // struct mptcp_subflow_data, MPTCP_TCPINFO (Debian 12's headers have these)
#include <linux/tcp.h>   // struct tcp_info with the delivery rate and the *_limited times
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "core/io/mptcp.hpp"

namespace sluice {

namespace {

constexpr int kTcpIsMptcp = 43; // TCP_IS_MPTCP (Linux 5.16+; not in Debian 12's headers)

// struct mptcp_info as Linux 6.7+ has it (Debian 12's headers end at mptcpi_csum_enabled).
// Only what is read here is named; an older kernel returns fewer bytes and is told apart by
// the length it gives back.
struct MptcpInfo {
    uint8_t subflows, add_addr_signal, add_addr_accepted, subflows_max, add_addr_signal_max, add_addr_accepted_max;
    uint32_t flags, token;
    uint64_t write_seq, snd_una, rcv_nxt;
    uint8_t local_addr_used, local_addr_max, csum_enabled;
    uint32_t retransmits;
    uint64_t bytes_retrans, bytes_sent, bytes_received, bytes_acked;
    uint8_t subflows_total, reserved[3];
    uint32_t last_data_sent, last_data_recv, last_ack_recv;
};
static_assert(offsetof(MptcpInfo, bytes_acked) == 72 && sizeof(MptcpInfo) == 96, "Linux's struct mptcp_info layout");
constexpr uint32_t kInfoFlagFallback = 1; // MPTCP_INFO_FLAG_FALLBACK

// At most this many subflows are read (the kernel's path manager allows 8 per connection).
constexpr unsigned kMaxSubflows = 16;

struct SubflowInfos {
    mptcp_subflow_data head;
    tcp_info info[kMaxSubflows];
};

// The subflows' TCP_INFO; 0 where the kernel gives none. A subflow's record may be shorter
// than ours (an older kernel): the rest stays zero.
unsigned subflow_infos(int fd, SubflowInfos& s) noexcept {
    std::memset(&s, 0, sizeof s);
    s.head.size_subflow_data = sizeof s.head;
    s.head.size_user = sizeof(tcp_info);
    socklen_t len = sizeof s;
    if (::getsockopt(fd, SOL_MPTCP, MPTCP_TCPINFO, &s, &len) != 0 || len < sizeof s.head) return 0;
    // The kernel fills min(size_user, size_kernel) bytes per subflow, at a stride of size_user.
    const unsigned filled = static_cast<unsigned>((len - sizeof s.head) / sizeof(tcp_info));
    return std::min({s.head.num_subflows, filled, kMaxSubflows});
}

} // namespace

bool runs_mptcp(int fd) noexcept {
    int on = 0;
    socklen_t len = sizeof on;
    return ::getsockopt(fd, IPPROTO_TCP, kTcpIsMptcp, &on, &len) == 0 && on == 1;
}

std::optional<StreamTcp> mptcp_stream_tcp(int fd, unsigned stream) {
    if (!runs_mptcp(fd)) return std::nullopt;
    SubflowInfos s;
    const unsigned n = subflow_infos(fd, s);
    if (n == 0) return std::nullopt;
    StreamTcp t;
    t.stream = stream;
    t.subflows = n;
    for (unsigned i = 0; i < n; ++i) {
        const tcp_info& ti = s.info[i];
        t.rtt_us = std::max(t.rtt_us, ti.tcpi_rtt);
        t.delivery_rate_bps += ti.tcpi_delivery_rate * 8;
        t.bytes_sent += ti.tcpi_bytes_sent;
        t.bytes_retrans += ti.tcpi_bytes_retrans;
        t.total_retrans += ti.tcpi_total_retrans;
        t.cwnd += ti.tcpi_snd_cwnd;
        if (ti.tcpi_snd_mss && (t.mss == 0 || ti.tcpi_snd_mss < t.mss)) t.mss = ti.tcpi_snd_mss;
        t.busy_us = std::max<uint64_t>(t.busy_us, ti.tcpi_busy_time);
        t.rwnd_limited_us = std::max<uint64_t>(t.rwnd_limited_us, ti.tcpi_rwnd_limited);
        t.sndbuf_limited_us = std::max<uint64_t>(t.sndbuf_limited_us, ti.tcpi_sndbuf_limited);
    }
    return t;
}

std::optional<uint64_t> mptcp_bytes_acked(int fd) noexcept {
    MptcpInfo mi{};
    socklen_t len = sizeof mi;
    // A plain TCP socket refuses SOL_MPTCP at once (EOPNOTSUPP): one cheap call.
    if (::getsockopt(fd, SOL_MPTCP, MPTCP_INFO, &mi, &len) != 0) return std::nullopt;
    if (mi.flags & kInfoFlagFallback) return std::nullopt;
    if (len >= offsetof(MptcpInfo, bytes_acked) + sizeof mi.bytes_acked) return mi.bytes_acked;
    SubflowInfos s;
    const unsigned n = subflow_infos(fd, s);
    if (n == 0) return std::nullopt;
    uint64_t acked = 0;
    for (unsigned i = 0; i < n; ++i) acked += s.info[i].tcpi_bytes_acked;
    return acked;
}

} // namespace sluice
