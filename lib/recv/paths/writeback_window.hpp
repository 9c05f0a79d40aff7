#pragma once
// Bounds the page cache a receive stream leaves behind when it writes files through it
// (buffered writes: the recv_write path, and the small files of the direct path).
//
// Why: a transfer larger than memory otherwise fills the page cache with written, clean pages,
// and every later write lands in a page the allocator has not handed out for a long time. On a
// VM whose host takes freed guest memory back (free page reporting, this project's test VM),
// the first write to such a page costs a host fault inside the copy: at the WDT report's full
// size the receiver spent 39% of its samples in copy_folio_from_iter_atomic, against 1.3% for
// WDT, which drops each file's pages once written (docs/benchmarks.md, issue 19). On bare
// metal the same growth costs reclaim work instead. Keeping the written data in a window of a
// few MiB per stream makes the pages the kernel frees the ones it hands out next.
//
// How: a file whose data is all written is handed over with its fd; its writeback starts at
// once (SYNC_FILE_RANGE_WRITE, asynchronous). When the window is full, the oldest file's
// writeback is waited for (normally long finished) and its pages are dropped
// (POSIX_FADV_DONTNEED, which leaves dirty pages alone, hence the wait). Durability is
// unchanged: --sync still fsyncs every file; without it nothing waits for the disk beyond
// what the window needs. Data the receiver wrote is not kept cached for readers afterwards,
// as with the direct path's O_DIRECT writes of large files.
#include <fcntl.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <string>

#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"

namespace sluice {

class WritebackWindow {
public:
    // Bytes and files written but not yet dropped, per stream. Large enough that the oldest
    // file's writeback has finished when the window reaches it (a window of 64 MiB is 60 ms
    // at 1 GB/s), small enough that it is a bounded share of memory at any stream count.
    static constexpr uint64_t kMaxBytes = uint64_t{64} << 20;
    static constexpr size_t kMaxFiles = 128; // open fds per stream, whatever the file sizes

    // Takes the fd of a file whose `bytes` are written. Throws Error (destination) when the
    // kernel reports a write-back error for a file in the window.
    void add(UniqueFd fd, uint64_t bytes) {
        if (!fd || bytes == 0) return;
        // Start writing back now, so that the wait when it leaves the window finds it done.
        if (::sync_file_range(fd.get(), 0, 0, SYNC_FILE_RANGE_WRITE) != 0) check(fd.get(), "start writing back");
        if (count_ == kMaxFiles) retire_oldest();
        Entry& e = ring_[(head_ + count_) % kMaxFiles];
        e.fd = std::move(fd);
        e.bytes = bytes;
        ++count_;
        bytes_ += bytes;
        while (bytes_ > kMaxBytes && count_ > 1) retire_oldest();
    }

    // Files dropped from the page cache so far (for tests and stats).
    uint64_t dropped() const noexcept { return dropped_; }

private:
    struct Entry {
        UniqueFd fd;
        uint64_t bytes = 0;
    };

    void retire_oldest() {
        Entry& e = ring_[head_];
        const int fd = e.fd.get();
        if (::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) == 0)
            ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); // advice: failure only leaves pages cached
        else
            check(fd, "write back");
        ++dropped_;
        bytes_ -= e.bytes;
        e.fd.reset();
        head_ = (head_ + 1) % kMaxFiles;
        --count_;
    }

    // A write-back error (EIO, ENOSPC) is the file's data not reaching the disk: an error of
    // the transfer. Anything else (a file system without sync_file_range) only means the pages
    // stay cached, as they would without the window.
    static void check(int fd, const char* what) {
        const int err = errno;
        if (err != EIO && err != ENOSPC && err != EDQUOT) return;
        char name[4096] = {};
        const std::string link = "/proc/self/fd/" + std::to_string(fd);
        const ssize_t n = ::readlink(link.c_str(), name, sizeof name - 1);
        throw_errno(ErrorCode::destination,
                    std::string("cannot ") + what + " '" +
                        (n > 0 ? std::string(name, static_cast<size_t>(n)) : "a received file") + "'",
                    err);
    }

    std::array<Entry, kMaxFiles> ring_{};
    size_t head_ = 0, count_ = 0;
    uint64_t bytes_ = 0;
    uint64_t dropped_ = 0;
};

} // namespace sluice
