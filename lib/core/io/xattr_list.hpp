#pragma once
// listxattrat(2) (Linux 6.13; not in older headers): an entry's attribute names relative to its
// directory, not following a symlink. One path component walked instead of a whole path (or a
// /proc/self/fd one): on a tree of small files most of the kernel time of a list by path was
// the lookup. An older kernel (ENOSYS) is asked by `path` (llistxattr) from then on.
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace sluice {

inline ssize_t list_xattr_names(int dir, const char* name, const char* path, char* b, size_t s) {
#if defined(__x86_64__)
    constexpr long kListxattrat = 465;
    static std::atomic<bool> missing{false};
    if (dir >= 0 && !missing.load(std::memory_order_relaxed)) {
        long n = ::syscall(kListxattrat, dir, name, AT_SYMLINK_NOFOLLOW, b, s);
        if (n >= 0 || errno != ENOSYS) return static_cast<ssize_t>(n);
        missing.store(true, std::memory_order_relaxed);
    }
#else
    (void)dir;
    (void)name;
#endif
    return ::llistxattr(path, b, s);
}

} // namespace sluice
