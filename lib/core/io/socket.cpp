#include "core/io/socket.hpp"

#include <algorithm>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <linux/tcp.h> // struct tcp_info with tcpi_bytes_acked (glibc's lacks it)
#include <poll.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstring>

#include "core/io/mptcp.hpp"
#include "core/io/sys_error.hpp"

namespace sluice {

UniqueFd listen_tcp(const std::string& bind_address, uint16_t port, ListenOptions options) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string service = std::to_string(port);
    int rc = ::getaddrinfo(bind_address.empty() ? nullptr : bind_address.c_str(), service.c_str(), &hints, &res);
    if (rc != 0) throw Error(ErrorCode::network, "cannot resolve bind address '" + bind_address + "': " + gai_strerror(rc));
    std::string where = (bind_address.empty() ? std::string("*") : bind_address) + ":" + service;
    int last_err = 0;
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        UniqueFd fd = stream_socket(ai->ai_family, options.mptcp);
        if (!fd) {
            last_err = errno;
            continue;
        }
        int one = 1;
        // Best effort: without it only a quick restart on the same port fails, and says so.
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if ((options.reuse_port && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
            ::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), options.backlog) != 0) {
            last_err = errno;
            continue;
        }
        ::freeaddrinfo(res);
        return fd;
    }
    ::freeaddrinfo(res);
    if (last_err == EADDRINUSE) throw Error(ErrorCode::network, "cannot listen on " + where + ": port " + service + " is in use");
    throw_errno(ErrorCode::network, "cannot listen on " + where, last_err);
}

uint16_t local_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throw_errno(ErrorCode::network, "getsockname");
    if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

namespace {

std::string address_text(const sockaddr* sa) {
    char buf[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
    if (sa->sa_family == AF_INET6) ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
    return buf;
}

// Non-blocking connect bounded by timeout_ms; returns 0 or an errno.
int connect_within(int fd, const sockaddr* sa, socklen_t len, int timeout_ms) {
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno;
    int err = 0;
    if (::connect(fd, sa, len) != 0) {
        if (errno != EINPROGRESS) return errno;
        pollfd p{fd, POLLOUT, 0};
        int rc = ::poll(&p, 1, timeout_ms);
        if (rc == 0) return ETIMEDOUT;
        if (rc < 0) return errno;
        socklen_t el = sizeof err;
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) return errno;
    }
    // The control connection is read with blocking calls (and SO_RCVTIMEO) from here on.
    if (err == 0 && ::fcntl(fd, F_SETFL, flags) != 0) return errno;
    return err;
}

} // namespace

UniqueFd connect_tcp(const std::string& host, uint16_t port, int timeout_ms, bool mptcp) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string service = std::to_string(port);
    int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (rc != 0) throw Error(ErrorCode::network, "cannot resolve host '" + host + "': " + gai_strerror(rc));
    std::string tried;
    int last_err = 0;
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        UniqueFd fd = stream_socket(ai->ai_family, mptcp);
        if (!fd) {
            last_err = errno;
            continue;
        }
        std::string addr = address_text(ai->ai_addr);
        tried += (tried.empty() ? "" : ", ") + addr;
        last_err = connect_within(fd.get(), ai->ai_addr, ai->ai_addrlen, timeout_ms);
        if (last_err == 0) {
            ::freeaddrinfo(res);
            return fd;
        }
    }
    ::freeaddrinfo(res);
    throw Error(ErrorCode::network,
                "cannot connect to " + host + ":" + service + " (tried " + tried + "): " + std::strerror(last_err),
                cause_of_errno(last_err));
}

// set_nodelay and set_socket_buffers are hints (latency, throughput): a kernel that refuses one
// moves the same bytes, so their results are not errors.
void set_nodelay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_nonblocking(int fd, bool on) {
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) != 0)
        throw_errno(ErrorCode::internal, "cannot change the flags of socket " + std::to_string(fd));
}

void set_socket_buffers(int fd, int bytes) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

void set_io_timeout(int fd, int ms) {
    timeval tv{ms / 1000, (ms % 1000) * 1000};
    // Every idle timeout rests on these: a socket without them would wait for a silent peer forever.
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
        throw_errno(ErrorCode::internal, "cannot set the timeout of socket " + std::to_string(fd));
}

std::string timeout_text(int ms) {
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
    std::string frac = std::to_string(ms % 1000);
    frac.insert(0, 3 - frac.size(), '0');
    while (frac.back() == '0') frac.pop_back();
    return std::to_string(ms / 1000) + "." + frac + " s";
}

void throw_send_errno(const std::string& what, int err) {
    if (err == EAGAIN || err == EWOULDBLOCK)
        throw Error(ErrorCode::network, what + ": peer stopped reading (timed out)", ErrorCause::timed_out);
    throw_errno(ErrorCode::network, what, err);
}

void send_all(int fd, std::span<const unsigned char> data, const char* what) {
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_send_errno(what, errno);
        }
        done += static_cast<size_t>(n);
    }
}

bool wait_readable_for(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    for (;;) {
        int r = ::poll(&p, 1, timeout_ms);
        if (r > 0) return true; // data, end of file or an error: the read that follows says which
        if (r == 0) return false;
        if (errno != EINTR) throw_errno(ErrorCode::internal, "poll on socket " + std::to_string(fd));
    }
}

void recv_exact(int fd, std::span<unsigned char> data, const char* what) {
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::recv(fd, data.data() + done, data.size() - done, MSG_WAITALL);
        if (n == 0) throw Error(ErrorCode::network, std::string(what) + ": connection closed by peer", ErrorCause::peer_closed);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN)
                throw Error(ErrorCode::network, std::string(what) + ": timed out waiting for the peer", ErrorCause::timed_out);
            throw_errno(ErrorCode::network, what);
        }
        done += static_cast<size_t>(n);
    }
}

uint64_t bytes_acked(int fd) noexcept {
    // TCP_INFO of an MPTCP socket counts its first subflow's bytes only.
    if (std::optional<uint64_t> m = mptcp_bytes_acked(fd)) return *m;
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return 0;
    return ti.tcpi_bytes_acked;
}

namespace {

// TCP_INFO of fd into ti; false when the call fails or the kernel's answer ends before
// `needed` bytes (a field newer than the kernel).
bool tcp_info_up_to(int fd, tcp_info& ti, size_t needed) noexcept {
    socklen_t len = sizeof ti;
    return ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && len >= needed;
}

} // namespace

uint64_t bytes_delivered(int fd) noexcept {
    if (std::optional<uint64_t> m = mptcp_bytes_acked(fd)) return *m;
    tcp_info ti{};
    // tcpi_delivered came with Linux 4.18: a shorter answer lacks it.
    if (!tcp_info_up_to(fd, ti, offsetof(tcp_info, tcpi_delivered) + sizeof ti.tcpi_delivered)) return 0;
    return uint64_t{ti.tcpi_delivered} * ti.tcpi_snd_mss;
}

uint32_t min_rtt_us(int fd) noexcept {
    tcp_info ti{};
    return tcp_info_up_to(fd, ti, offsetof(tcp_info, tcpi_min_rtt) + sizeof ti.tcpi_min_rtt) ? ti.tcpi_min_rtt : 0;
}

uint32_t out_of_order_packets(int fd) noexcept {
    tcp_info ti{};
    // tcpi_rcv_ooopack came with Linux 5.4.
    return tcp_info_up_to(fd, ti, offsetof(tcp_info, tcpi_rcv_ooopack) + sizeof ti.tcpi_rcv_ooopack) ? ti.tcpi_rcv_ooopack : 0;
}

bool RecvLowWater::expect(size_t owed) noexcept {
    // Below 64 KiB a read completes within a few segments: not worth a system call.
    constexpr size_t kMinWorthIt = 64 << 10, kCap = 1 << 20;
    // At the cap already, with at least that much owed: nothing to change, no system call
    // (the receive buffer only grows while autotuning, so the cap still fits it).
    if (current_ == static_cast<int>(kCap) && owed >= kCap) return true;
    int want = 1;
    if (owed >= kMinWorthIt) {
        // A quarter of the current receive buffer at most: a mark the kernel would have to grow
        // the buffer for also clamps the TCP window to the mark (tcp_set_rcvlowat), and the
        // window must stay well above the mark for the sender to keep the pipe full.
        // Autotuning keeps growing the buffer, so the mark follows it up.
        int rcvbuf = 0;
        socklen_t len = sizeof rcvbuf;
        if (::getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) != 0) rcvbuf = 0;
        want = static_cast<int>(std::min({owed, kCap, static_cast<size_t>(rcvbuf) / 4}));
        if (want < 1) want = 1;
    }
    // Best effort: a kernel that refuses it only wakes the reader more often.
    if (want != current_ && ::setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) == 0) current_ = want;
    return current_ > 1;
}

std::string primary_address() {
    ifaddrs* list = nullptr;
    std::string found = "127.0.0.1";
    if (::getifaddrs(&list) != 0) return found;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        if (i->ifa_flags & IFF_LOOPBACK) continue;
        if (!(i->ifa_flags & IFF_UP)) continue;
        found = address_text(i->ifa_addr);
        break;
    }
    ::freeifaddrs(list);
    return found;
}

std::string peer_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
    const auto* sa = reinterpret_cast<const sockaddr*>(&ss);
    if (ss.ss_family == AF_INET6)
        return "[" + address_text(sa) + "]:" + std::to_string(ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port));
    if (ss.ss_family == AF_INET)
        return address_text(sa) + ":" + std::to_string(ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port));
    return "?";
}

} // namespace sluice
