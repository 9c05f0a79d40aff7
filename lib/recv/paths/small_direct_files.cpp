#include "recv/paths/small_direct_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/io/sys_error.hpp"
#include "recv/paths/direct_layout.hpp"
#include "recv/store/file_table.hpp"

namespace sluice {

void pwrite_whole(int fd, const unsigned char* p, size_t n, uint64_t offset, const std::string& path) {
    while (n) {
        ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) throw_errno(ErrorCode::destination, "cannot write '" + path + "'");
        if (w == 0) throw Error(ErrorCode::destination, "cannot write '" + path + "': short write (no space left?)");
        p += w;
        n -= static_cast<size_t>(w);
        offset += static_cast<uint64_t>(w);
    }
}

size_t SmallDirectFiles::write_tail(const RecvFile& f, int fd, const unsigned char* data, size_t size) {
    const size_t pages = size / direct_layout::kAlign * direct_layout::kAlign;
    if (pages < size) pwrite_whole(fd, data + pages, size - pages, pages, f.entry.path);
    if (pages == 0) return 0;
    // Allocated first, the write is an overwrite of unwritten extents, which ext4 issues inline;
    // into a hole it goes to an io-wq worker (a wakeup and two context switches per file). Cold
    // 10,000-file subset of the minor set: 2.5k against 24k receiver context switches.
    if (allocate_ && ::fallocate(fd, 0, 0, static_cast<off_t>(pages)) != 0) {
        if (errno != EOPNOTSUPP) throw_errno(ErrorCode::destination, "cannot allocate '" + f.entry.path + "'");
        allocate_ = false; // only the worker hand-off again
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0) {
        ++files_;
        bytes_ += pages;
        return pages;
    }
    // No O_DIRECT here (tmpfs, some FUSE file systems): the pages go through the page cache too.
    refused_ = std::string("O_DIRECT refused (") + std::strerror(errno) + ")";
    enabled_ = false;
    pwrite_whole(fd, data, pages, 0, f.entry.path);
    return 0;
}

std::string SmallDirectFiles::fallback() const {
    if (refused_.empty()) return {};
    return "direct: " + refused_ + ": small files written through the page cache";
}

} // namespace sluice
