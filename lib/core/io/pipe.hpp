#pragma once
#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>
#include <string>

#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"

namespace sluice {

// A pipe used as the in-kernel staging buffer of splice paths. Its capacity bounds how many
// bytes one splice pair moves, so it is enlarged as far as the system allows.
class Pipe {
public:
    explicit Pipe(int wanted_size) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno(ErrorCode::internal, "pipe2");
        read_.reset(fds[0]);
        write_.reset(fds[1]);
        int got = ::fcntl(fds[1], F_SETPIPE_SZ, wanted_size);
        if (got < 0) got = ::fcntl(fds[1], F_GETPIPE_SZ);
        size_ = got > 0 ? got : 65536;
    }
    int read_fd() const noexcept { return read_.get(); }
    int write_fd() const noexcept { return write_.get(); }
    int size() const noexcept { return size_; }

private:
    UniqueFd read_, write_;
    int size_ = 0;
};

// Asks for a bigger buffer on a caller's pipe (a shell's holds 64 KiB, so a 1 MiB piece would
// move in 16 steps, each a wake-up). Returns why it stays smaller when fd is a pipe the kernel
// would not grow (pipe-max-size, the per-user pipe page limit): a slower path the stats must
// name. Empty when it grew, or when fd is no pipe (a file or socket has no pipe buffer).
inline std::string grow_pipe(int fd, int wanted, const char* which) {
    if (::fcntl(fd, F_SETPIPE_SZ, wanted) >= 0) return {};
    int err = errno;
    struct stat st = {};
    if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return {};
    int now = ::fcntl(fd, F_GETPIPE_SZ);
    return std::string(which) + " pipe stays at " + std::to_string(now > 0 ? now / 1024 : 0) + " KiB (growing it to " +
           std::to_string(wanted / 1024) + " KiB: " + std::strerror(err) + "): more wake-ups per piece";
}

} // namespace sluice
