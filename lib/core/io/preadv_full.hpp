#pragma once
// preadv until every buffer is full: a short read (a signal, a page the kernel stopped at)
// resumes where it stopped, the iovecs advanced by hand. For the paths that read a file's
// range straight into TLS record slots (serve's HTTPS responses, the get ring's sealed blocks).
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>

namespace sluice {

inline constexpr size_t kPreadvFullMax = 64;

// Fills iov[0..n) (n at most kPreadvFullMax) from fd at off. Returns 0, the read's errno, or
// EIO when the file ends first (it got shorter than the caller was told).
inline int preadv_full(int fd, const iovec* iov, size_t n, off_t off) {
    size_t want = 0;
    for (size_t i = 0; i < n; ++i) want += iov[i].iov_len;
    for (size_t got = 0; got < want;) {
        iovec rest[kPreadvFullMax];
        size_t cnt = 0, skip = got;
        for (size_t i = 0; i < n; ++i) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            rest[cnt++] = {static_cast<char*>(iov[i].iov_base) + skip, iov[i].iov_len - skip};
            skip = 0;
        }
        const ssize_t r = ::preadv(fd, rest, static_cast<int>(cnt), off + static_cast<off_t>(got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return r < 0 ? errno : EIO;
        got += static_cast<size_t>(r);
    }
    return 0;
}

} // namespace sluice
