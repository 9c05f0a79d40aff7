#pragma once
#include <fcntl.h>

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

} // namespace sluice
