#include "core/io/mptcp.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>


namespace sluice {

namespace {

// Not in Debian 12's headers (Linux 5.16+): 1 on a connection running MPTCP, 0 on TCP and on
// an MPTCP socket that fell back.
constexpr int kTcpIsMptcp = 43;
constexpr int kMptcpInfo = 1; // SOL_MPTCP; struct mptcp_info starts with u8 mptcpi_subflows

MptcpMiss miss_of_errno(int err) noexcept {
    switch (err) {
    case EPROTONOSUPPORT: return MptcpMiss::not_built;
    case ENOPROTOOPT: return MptcpMiss::disabled;
    default: return MptcpMiss::refused;
    }
}

std::string why_text(MptcpMiss m, int err) {
    switch (m) {
    case MptcpMiss::none: return "";
    case MptcpMiss::not_built: return "this kernel has no MPTCP (socket: protocol not supported)";
    case MptcpMiss::disabled: return "MPTCP is disabled here (net.mptcp.enabled=0)";
    case MptcpMiss::refused: return std::string("an MPTCP socket was refused: ") + std::strerror(err);
    case MptcpMiss::peer_plain: return "the peer answered in plain TCP (it or the path lacks MPTCP; the listening side needs --mptcp)";
    case MptcpMiss::accepted_plain: return "the peer connected in plain TCP (it did not ask for MPTCP, or the path stripped it)";
    }
    return "";
}

// Why this host cannot make an MPTCP socket of `family` now (none when it can).
MptcpMiss socket_miss(int family, int& err) {
    UniqueFd probe(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_MPTCP));
    if (probe) return MptcpMiss::none;
    err = errno;
    return miss_of_errno(err);
}

} // namespace

UniqueFd stream_socket(int family, bool mptcp) {
    if (mptcp) {
        UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_MPTCP));
        if (fd) return fd;
    }
    return UniqueFd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

ConnectionMptcp mptcp_of(int fd, unsigned stream, bool asked, bool accepted) {
    ConnectionMptcp c{.stream = stream};
    if (!asked) {
        c.why = "not asked (--mptcp)";
        return c;
    }
    int on = 0;
    socklen_t len = sizeof on;
    if (::getsockopt(fd, IPPROTO_TCP, kTcpIsMptcp, &on, &len) == 0 && on == 1) {
        c.mptcp = true;
        c.subflows = mptcp_subflows(fd);
        return c;
    }
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    const int family = ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl) == 0 ? ss.ss_family : AF_INET;
    int err = 0;
    MptcpMiss m = socket_miss(family, err);
    if (m == MptcpMiss::none) m = accepted ? MptcpMiss::accepted_plain : MptcpMiss::peer_plain;
    c.why = why_text(m, err);
    return c;
}

unsigned mptcp_subflows(int fd) noexcept {
    unsigned char info[256] = {};
    socklen_t len = sizeof info;
    if (::getsockopt(fd, SOL_MPTCP, kMptcpInfo, info, &len) != 0 || len < 1) return 0;
    return info[0];
}

std::string mptcp_summary(const std::vector<ConnectionMptcp>& connections) {
    for (const ConnectionMptcp& c : connections)
        if (!c.mptcp) return "fallback";
    return "on";
}

std::string mptcp_line(const ConnectionMptcp& c) {
    std::string who = c.stream == 0 ? "control connection" : "data stream " + std::to_string(c.stream);
    if (c.mptcp) return "mptcp: " + who + ": MPTCP";
    return "mptcp: " + who + ": plain TCP: " + c.why;
}

} // namespace sluice
