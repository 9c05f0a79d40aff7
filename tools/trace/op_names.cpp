#include "op_names.hpp"

#include "trace.h"

#include <array>
#include <iterator>
#include <string_view>

namespace sluice::trace {
namespace {

struct SyscallRow {
    uint16_t op; // enum sl_op: the probe maps this architecture's syscall numbers to it
    const char* name;
    OpFamily family;
};

constexpr SyscallRow syscalls[] = {
    {SL_OP_READ, "read", OpFamily::read},
    {SL_OP_WRITE, "write", OpFamily::write},
    {SL_OP_PREAD64, "pread64", OpFamily::read},
    {SL_OP_PWRITE64, "pwrite64", OpFamily::write},
    {SL_OP_READV, "readv", OpFamily::read},
    {SL_OP_WRITEV, "writev", OpFamily::write},
    {SL_OP_PREADV, "preadv", OpFamily::read},
    {SL_OP_PWRITEV, "pwritev", OpFamily::write},
    {SL_OP_PREADV2, "preadv2", OpFamily::read},
    {SL_OP_PWRITEV2, "pwritev2", OpFamily::write},
    {SL_OP_SENDTO, "sendto", OpFamily::write},
    {SL_OP_RECVFROM, "recvfrom", OpFamily::read},
    {SL_OP_SENDMSG, "sendmsg", OpFamily::write},
    {SL_OP_RECVMSG, "recvmsg", OpFamily::read},
    {SL_OP_SENDMMSG, "sendmmsg", OpFamily::write_mmsg},
    {SL_OP_RECVMMSG, "recvmmsg", OpFamily::read_mmsg},
    {SL_OP_SENDFILE, "sendfile", OpFamily::splice},
    {SL_OP_SPLICE, "splice", OpFamily::splice},
    {SL_OP_TEE, "tee", OpFamily::splice},
    {SL_OP_VMSPLICE, "vmsplice", OpFamily::vmsplice},
    {SL_OP_COPY_FILE_RANGE, "copy_file_range", OpFamily::splice},
};
static_assert(std::size(syscalls) == SL_OP_SYSCALL_END - 1, "every enum sl_op has a name");

// IORING_OP_* in kernel order (include/uapi/linux/io_uring.h, up to 6.18); named here so the
// tool does not depend on the age of the installed headers.
constexpr std::array<std::string_view, 63> uring_ops = {
    "nop",
    "readv",
    "writev",
    "fsync",
    "read_fixed",
    "write_fixed",
    "poll_add",
    "poll_remove",
    "sync_file_range",
    "sendmsg",
    "recvmsg",
    "timeout",
    "timeout_remove",
    "accept",
    "async_cancel",
    "link_timeout",
    "connect",
    "fallocate",
    "openat",
    "close",
    "files_update",
    "statx",
    "read",
    "write",
    "fadvise",
    "madvise",
    "send",
    "recv",
    "openat2",
    "epoll_ctl",
    "splice",
    "provide_buffers",
    "remove_buffers",
    "tee",
    "shutdown",
    "renameat",
    "unlinkat",
    "mkdirat",
    "symlinkat",
    "linkat",
    "msg_ring",
    "fsetxattr",
    "setxattr",
    "fgetxattr",
    "getxattr",
    "socket",
    "uring_cmd",
    "send_zc",
    "sendmsg_zc",
    "read_multishot",
    "waitid",
    "futex_wait",
    "futex_wake",
    "futex_waitv",
    "fixed_fd_install",
    "ftruncate",
    "bind",
    "listen",
    "recv_zc",
    "epoll_wait",
    "readv_fixed",
    "writev_fixed",
    "pipe",
};

OpFamily uring_family(std::string_view n) {
    if (n == "readv" || n == "read_fixed" || n == "read" || n == "recv" || n == "recvmsg" || n == "read_multishot" ||
        n == "readv_fixed")
        return OpFamily::read;
    if (n == "writev" || n == "write_fixed" || n == "write" || n == "send" || n == "sendmsg" || n == "writev_fixed")
        return OpFamily::write;
    if (n == "splice" || n == "tee") return OpFamily::splice;
    if (n == "send_zc" || n == "sendmsg_zc") return OpFamily::send_zc;
    return OpFamily::other;
}

} // namespace

OpInfo op_info(uint16_t op) {
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
    for (const auto& row : syscalls)
        if (row.op == op) {
            info.name = row.name;
            info.family = row.family;
            return info;
        }
    info.name = "op" + std::to_string(op);
    return info;
}

} // namespace sluice::trace
