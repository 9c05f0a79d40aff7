#include "core/io/send_backlog.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace sluice {

uint32_t set_send_backlog(int fd, uint32_t path_us) noexcept {
    const uint32_t bytes = send_backlog_for(path_us);
    if (bytes == 0) return 0;
    const int v = static_cast<int>(bytes);
    return ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v) == 0 ? bytes : 0;
}

uint32_t send_backlog_of(int fd) noexcept {
    int v = 0;
    socklen_t len = sizeof v;
    // The kernel's default (net.ipv4.tcp_notsent_lowat, UINT_MAX) reads as -1: no bound.
    if (::getsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len) != 0 || v <= 0) return 0;
    return static_cast<uint32_t>(v);
}

} // namespace sluice
