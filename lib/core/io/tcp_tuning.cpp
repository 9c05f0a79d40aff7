#include "core/io/tcp_tuning.hpp"

#include <netinet/in.h>
#include <linux/inet_diag.h> // union tcp_cc_info (TCP_CC_INFO's answer)
#include <linux/tcp.h> // struct tcp_info with the delivery rate and the *_limited times (glibc's lacks them)
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/io/mptcp.hpp"
#include "core/io/unique_fd.hpp"
#include "sluice/error.hpp"

namespace sluice {

namespace {

constexpr size_t kCaNameMax = 16; // TCP_CA_NAME_MAX in the kernel's include/net/tcp.h (not in uapi)

std::string first_line(const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

[[noreturn]] void throw_unavailable(const std::string& name, int err) {
    std::string avail = first_line("/proc/sys/net/ipv4/tcp_available_congestion_control");
    std::string why = err == EPERM ? "not permitted for this process (see net.ipv4.tcp_allowed_congestion_control: " +
                                         first_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control") + ")"
                                   : "not available in this kernel";
    throw Error(ErrorCode::usage, "--cc '" + name + "': congestion control " + why + "; available: " +
                                      (avail.empty() ? "(unknown: cannot read /proc/sys/net/ipv4/"
                                                       "tcp_available_congestion_control)"
                                                     : avail));
}

// The last field of a whitespace-separated sysctl (tcp_rmem/tcp_wmem: "min default max"), or 0.
uint64_t sysctl_max(const char* path) {
    std::string line = first_line(path);
    size_t end = line.find_last_not_of(" \t");
    if (end == std::string::npos) return 0;
    size_t start = line.find_last_of(" \t", end);
    start = start == std::string::npos ? 0 : start + 1;
    return std::strtoull(line.substr(start, end - start + 1).c_str(), nullptr, 10);
}

std::string mb(double bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f MB", bytes / 1e6);
    return b;
}

} // namespace

void set_congestion_control(int fd, const std::string& name) {
    if (name.empty()) return;
    // The kernel reads the name as a C string of at most 15 bytes: a longer one, or one with a
    // NUL inside, would be cut to a different name instead of refused.
    if (name.size() >= kCaNameMax || name.find('\0') != std::string::npos) throw_unavailable(name, ENOENT);
    if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) != 0)
        throw_unavailable(name, errno);
}

void check_congestion_control(const std::string& name) {
    if (name.empty()) return;
    UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) probe.reset(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) throw Error(ErrorCode::internal, "cannot open a TCP socket to check --cc '" + name + "'");
    set_congestion_control(probe.get(), name);
}

std::string congestion_control_of(int fd) {
    char buf[kCaNameMax] = {};
    socklen_t len = sizeof buf;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, buf, &len) != 0) return "";
    return std::string(buf, strnlen(buf, len));
}

// fd's BBR gains from TCP_CC_INFO (shifted left 8 bits), or false when it is not BBR or cannot say.
static bool bbr_gains(int fd, uint32_t& pacing, uint32_t& cwnd) noexcept {
    char name[kCaNameMax] = {};
    socklen_t len = sizeof name;
    // TCP_CC_INFO's answer is the algorithm's own struct: read as BBR's only when it is BBR.
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0 || strncmp(name, "bbr", sizeof name) != 0)
        return false;
    tcp_cc_info info{};
    len = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CC_INFO, &info, &len) != 0 || len < sizeof info.bbr) return false;
    pacing = info.bbr.bbr_pacing_gain;
    cwnd = info.bbr.bbr_cwnd_gain;
    return true;
}

bool in_bbr_startup(int fd) noexcept {
    uint32_t pacing = 0, cwnd = 0;
    constexpr uint32_t kProbeBwHighest = 256 * 5 / 4; // gains are shifted left 8 bits
    return bbr_gains(fd, pacing, cwnd) && pacing > kProbeBwHighest;
}

bool in_bbr_probe_rtt(int fd) noexcept {
    uint32_t pacing = 0, cwnd = 0;
    // Only PROBE_RTT runs both gains at 1: ProbeBW's window gain is 2, start-up's and drain's 2.77-2.89.
    return bbr_gains(fd, pacing, cwnd) && pacing == 256 && cwnd == 256;
}

uint32_t smoothed_rtt_us(int fd) noexcept {
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return 0;
    return ti.tcpi_rtt;
}

StreamTcp stream_tcp(int fd, unsigned stream) {
    if (std::optional<StreamTcp> m = mptcp_stream_tcp(fd, stream)) return *m;
    tcp_info ti{};
    socklen_t len = sizeof ti; // an older kernel fills less; the rest stays zero
    StreamTcp s;
    s.stream = stream;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return s;
    s.rtt_us = ti.tcpi_rtt;
    s.delivery_rate_bps = ti.tcpi_delivery_rate * 8;
    s.bytes_sent = ti.tcpi_bytes_sent;
    s.bytes_retrans = ti.tcpi_bytes_retrans;
    s.total_retrans = ti.tcpi_total_retrans;
    s.cwnd = ti.tcpi_snd_cwnd;
    s.mss = ti.tcpi_snd_mss;
    s.busy_us = ti.tcpi_busy_time;
    s.rwnd_limited_us = ti.tcpi_rwnd_limited;
    s.sndbuf_limited_us = ti.tcpi_sndbuf_limited;
    return s;
}

namespace {

int buffer_size(int fd, int which) {
    int v = 0;
    socklen_t len = sizeof v;
    return ::getsockopt(fd, SOL_SOCKET, which, &v, &len) == 0 ? v : 0;
}

// "... raise it to at least 20.0 MB per Gbit/s of this stream at 80.2 ms RTT": the kernel keeps
// about half of a socket buffer for payload, so a window of one bandwidth-delay product needs
// a buffer cap of about two.
std::string fix_text(uint32_t rtt_us) {
    char b[160];
    std::snprintf(b, sizeof b, "%s per Gbit/s of this stream at %.1f ms RTT (2 x rate x RTT)",
                  mb(2.0 * 1e9 / 8 * (rtt_us / 1e6)).c_str(), rtt_us / 1e3);
    return b;
}

// A window of half the buffer, once per round trip: the most one stream can move.
std::string ceiling_text(uint64_t buffer, uint32_t rtt_us) {
    char b[64];
    std::snprintf(b, sizeof b, "%.0f Mbit/s", buffer / 2.0 * 8 / (rtt_us / 1e6) / 1e6);
    return b;
}

// "data streams 1, 3 run MPTCP: not judged (...)", or "" for none.
std::string unjudged_text(const std::vector<unsigned>& streams) {
    if (streams.empty()) return "";
    std::string list;
    for (unsigned s : streams) list += (list.empty() ? "" : ", ") + std::to_string(s);
    return std::string(streams.size() == 1 ? "data stream " : "data streams ") + list + " run" +
           (streams.size() == 1 ? "s" : "") +
           " MPTCP: window limits not judged (a socket-buffer cap is not told apart per subflow)";
}

} // namespace

std::vector<std::string> send_window_limits(const std::vector<int>& fds, const std::vector<StreamTcp>& streams,
                                            std::string* unjudged) {
    // Below a tenth of the busy time a cap is noise (slow start, the last block's tail).
    constexpr double kNoticeable = 0.1;
    std::vector<std::string> out;
    const uint64_t wmem = sysctl_max("/proc/sys/net/ipv4/tcp_wmem");
    std::vector<unsigned> mptcp;
    for (size_t i = 0; i < fds.size() && i < streams.size(); ++i) {
        const StreamTcp& s = streams[i];
        if (s.subflows > 0) {
            mptcp.push_back(s.stream);
            continue;
        }
        if (s.busy_us == 0 || s.rtt_us == 0 || wmem == 0) continue;
        // Held back by its send buffer, and autotuning had already grown that to the cap.
        if (double(s.sndbuf_limited_us) / s.busy_us < kNoticeable) continue;
        if (uint64_t(buffer_size(fds[i], SO_SNDBUF)) < wmem) continue;
        char pct[16];
        std::snprintf(pct, sizeof pct, "%.0f%%", 100.0 * s.sndbuf_limited_us / s.busy_us);
        out.push_back("data stream " + std::to_string(s.stream) + " was held back by its send buffer for " + pct +
                      " of its busy time, capped by net.ipv4.tcp_wmem's max here (" + std::to_string(wmem) +
                      ", at most " + ceiling_text(wmem, s.rtt_us) + " per stream): raise it to at least " +
                      fix_text(s.rtt_us));
    }
    if (unjudged) *unjudged = unjudged_text(mptcp);
    return out;
}

std::vector<std::string> recv_window_limits(const std::vector<std::pair<unsigned, int>>& streams, double seconds,
                                            std::string* unjudged) {
    std::vector<std::string> out;
    std::vector<unsigned> mptcp;
    const uint64_t rmem = sysctl_max("/proc/sys/net/ipv4/tcp_rmem");
    for (const auto& [stream, fd] : streams) {
        if (runs_mptcp(fd)) {
            mptcp.push_back(stream);
            continue;
        }
        // Autotuning grows the buffer to twice what the rate it sees needs: one at the cap wanted more.
        if (rmem == 0 || seconds <= 0 || uint64_t(buffer_size(fd, SO_RCVBUF)) < rmem) continue;
        tcp_info ti{};
        socklen_t len = sizeof ti;
        if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) continue;
        const uint32_t rtt = ti.tcpi_rcv_rtt ? ti.tcpi_rcv_rtt : ti.tcpi_rtt;
        if (rtt == 0) continue;
        // Only a stream that came near what the capped window allows was held by it; one far
        // below was held by something else (loss, the sender, the path).
        const double ceiling_bps = rmem / 2.0 * 8 / (rtt / 1e6), got_bps = ti.tcpi_bytes_received * 8.0 / seconds;
        if (got_bps < ceiling_bps / 2) continue;
        out.push_back("data stream " + std::to_string(stream) +
                      "'s receive buffer grew to net.ipv4.tcp_rmem's max here (" + std::to_string(rmem) +
                      ", a window for at most " + ceiling_text(rmem, rtt) +
                      " per stream): raise it to at least " + fix_text(rtt));
    }
    if (unjudged) *unjudged = unjudged_text(mptcp);
    return out;
}

} // namespace sluice
