#pragma once
// Small whole files sent the cheap way: no per-file mmap (page-table set-up, munmap and its TLB
// flush) for the checksum and no splices handed to io-wq workers, which cost more than the
// copies they save on files of a few pages (docs/benchmarks.md, issue 5). Each file is read
// with pread, checksummed there while cache-hot, and then:
//  - up to kInlineBytes: kept in one stream buffer behind its BLOCK prefix; the buffer, holding
//    many files, goes out with one send (two copies: a system call costs more than copying);
//  - larger: its prefix is sent and its data follows from the page cache with sendfile (one
//    copy, the read for the checksum).
//  - not in the page cache before this read (cold): kept in the buffer whatever its size, and its
//    pages dropped right after the read (POSIX_FADV_DONTNEED), as WDT does for every file: at a
//    transfer's full size the set would otherwise fill memory, and every later read would land in
//    pages the kernel has not handed out for a long time (issue 19). Files that were cached stay.
// The wire format is unchanged: consecutive BLOCK frames.
#include <cstddef>

#include "core/io/aligned_buffer.hpp"
#include "send/paths/source_reader.hpp"
#include "send/plan/work_queue.hpp"

namespace sluice {

class SmallFileBatch {
public:
    // Files up to this size go through the batch (when they are sent whole).
    static constexpr uint64_t kMaxFileBytes = 512 * 1024;
    // Above this a file's data is sent with sendfile instead of copied into the buffer: at 1
    // Gbit/s the send copy was a quarter of the sender's CPU on the minor set (1-400 KiB files).
    static constexpr uint64_t kInlineBytes = 64 * 1024;
    static constexpr size_t kBufferBytes = 4 << 20;

    SmallFileBatch(int sock, SourceReader& reader) : sock_(sock), reader_(reader), buf_(kBufferBytes), scratch_(kMaxFileBytes) {}

    static bool fits(const Segment& s) {
        return s.offset == 0 && s.length == s.file->size && s.length <= kMaxFileBytes && s.length > 0;
    }
    // Reads seg's file into the buffer (sending what is buffered first when it is full).
    void add(const Segment& seg);
    // Sends what is buffered; more: another frame follows at once (MSG_MORE).
    void flush(bool more);
    // Files read in from the disk whose pages were dropped after the read.
    uint64_t dropped() const noexcept { return dropped_; }

private:
    void send_file_data(const Segment& seg);
    bool fully_cached(int fd, uint64_t length);

    int sock_;
    SourceReader& reader_;
    AlignedBuffer buf_;
    AlignedBuffer scratch_; // a larger file's bytes, read only for its checksum
    size_t used_ = 0;
    uint64_t dropped_ = 0;
    bool cachestat_works_ = true;
};

} // namespace sluice
