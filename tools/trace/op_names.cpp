#include "op_names.hpp"

#include "trace.h"

#include <array>
#include <string_view>

namespace sluice::trace {
namespace {

struct SyscallRow {
    uint16_t nr;
    const char *name;
    OpFamily family;
};

// x86_64 numbers, the same set as bpf/trace.bpf.c.
constexpr SyscallRow syscalls[] = {
    {0, "read", OpFamily::read},         {1, "write", OpFamily::write},
    {17, "pread64", OpFamily::read},     {18, "pwrite64", OpFamily::write},
    {19, "readv", OpFamily::read},       {20, "writev", OpFamily::write},
    {40, "sendfile", OpFamily::splice},  {44, "sendto", OpFamily::write},
    {45, "recvfrom", OpFamily::read},    {46, "sendmsg", OpFamily::write},
    {47, "recvmsg", OpFamily::read},     {275, "splice", OpFamily::splice},
    {276, "tee", OpFamily::splice},      {278, "vmsplice", OpFamily::vmsplice},
    {295, "preadv", OpFamily::read},     {296, "pwritev", OpFamily::write},
    {299, "recvmmsg", OpFamily::read_mmsg}, {307, "sendmmsg", OpFamily::write_mmsg},
    {326, "copy_file_range", OpFamily::splice},
    {327, "preadv2", OpFamily::read},    {328, "pwritev2", OpFamily::write},
};

// IORING_OP_* in kernel order (include/uapi/linux/io_uring.h, up to 6.18); named here so the
// tool does not depend on the age of the installed headers.
constexpr std::array<std::string_view, 63> uring_ops = {
    "nop", "readv", "writev", "fsync", "read_fixed", "write_fixed", "poll_add", "poll_remove",
    "sync_file_range", "sendmsg", "recvmsg", "timeout", "timeout_remove", "accept", "async_cancel",
    "link_timeout", "connect", "fallocate", "openat", "close", "files_update", "statx", "read",
    "write", "fadvise", "madvise", "send", "recv", "openat2", "epoll_ctl", "splice",
    "provide_buffers", "remove_buffers", "tee", "shutdown", "renameat", "unlinkat", "mkdirat",
    "symlinkat", "linkat", "msg_ring", "fsetxattr", "setxattr", "fgetxattr", "getxattr", "socket",
    "uring_cmd", "send_zc", "sendmsg_zc", "read_multishot", "waitid", "futex_wait", "futex_wake",
    "futex_waitv", "fixed_fd_install", "ftruncate", "bind", "listen", "recv_zc", "epoll_wait",
    "readv_fixed", "writev_fixed", "pipe",
};

OpFamily uring_family(std::string_view n)
{
    if (n == "readv" || n == "read_fixed" || n == "read" || n == "recv" || n == "recvmsg" ||
        n == "read_multishot" || n == "readv_fixed")
        return OpFamily::read;
    if (n == "writev" || n == "write_fixed" || n == "write" || n == "send" || n == "sendmsg" ||
        n == "writev_fixed")
        return OpFamily::write;
    if (n == "splice" || n == "tee")
        return OpFamily::splice;
    if (n == "send_zc" || n == "sendmsg_zc")
        return OpFamily::send_zc;
    return OpFamily::other;
}

}  // namespace

OpInfo op_info(uint16_t op)
{
    OpInfo info;
    if (op & SL_OP_URING) {
        unsigned code = op & ~SL_OP_URING;
        info.uring = true;
        std::string_view n = code < uring_ops.size() ? uring_ops[code] : std::string_view{};
        info.name = n.empty() ? "io_uring:op" + std::to_string(code) : "io_uring:" + std::string(n);
        info.family = uring_family(n);
        info.swap_sides = info.family == OpFamily::splice;
        return info;
    }
    for (const auto &row : syscalls)
        if (row.nr == op) {
            info.name = row.name;
            info.family = row.family;
            return info;
        }
    info.name = "syscall" + std::to_string(op);
    return info;
}

}  // namespace sluice::trace
