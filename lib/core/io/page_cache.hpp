#pragma once
// Whether a file range is in the page cache, from cachestat(2) (Linux 6.5; not in older
// headers). The send paths read what is not cached with O_DIRECT (issue 19): through the page
// cache a set larger than memory lands every byte in pages the kernel has not handed out for a
// long time, which on this class of VM costs more than the copy itself.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <optional>

namespace sluice {

struct PageCacheCounts {
    uint64_t pages, cached, dirty; // dirty: dirty or under writeback
};

// cachestat(2) of [offset, offset + length) of fd; nullopt when the kernel has none (the caller
// says so and reads as before).
inline std::optional<PageCacheCounts> page_cache_counts(int fd, uint64_t offset, uint64_t length) {
    constexpr long kSysCachestat = 451;
    struct Range {
        uint64_t off, len;
    } r{offset / 4096 * 4096, length + offset % 4096};
    struct {
        uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
    } cs{};
    if (::syscall(kSysCachestat, fd, &r, &cs, 0) != 0) return std::nullopt;
    return PageCacheCounts{(r.len + 4095) / 4096, cs.nr_cache, cs.nr_dirty + cs.nr_writeback};
}

// True when every page of [offset, offset + length) of fd is cached; nullopt without cachestat(2).
inline std::optional<bool> range_cached(int fd, uint64_t offset, uint64_t length) {
    const auto c = page_cache_counts(fd, offset, length);
    if (!c) return std::nullopt;
    return c->cached >= c->pages;
}

} // namespace sluice
