#pragma once
// Small whole files sent the cheap way: each is read with pread into one stream buffer behind
// its BLOCK prefix (checksummed there while cache-hot) and the buffer, holding many files, goes
// out with one send. For a file of a few pages this costs two copies instead of the zero-copy
// path's per-file mmap + page-table set-up + munmap (TLB flush) for the checksum and its
// splices handed to io-wq workers, which cost more than the copies (docs/benchmarks.md, issue 5).
// The wire format is unchanged: consecutive BLOCK frames.
#include <cstddef>

#include "io/aligned_buffer.hpp"
#include "paths/source_reader.hpp"
#include "plan/work_queue.hpp"

namespace sluice {

class SmallFileBatch {
public:
    // Files up to this size go through the batch (when they are sent whole).
    static constexpr uint64_t kMaxFileBytes = 512 * 1024;
    static constexpr size_t kBufferBytes = 4 << 20;

    SmallFileBatch(int sock, SourceReader& reader) : sock_(sock), reader_(reader), buf_(kBufferBytes) {}

    static bool fits(const Segment& s) {
        return s.offset == 0 && s.length == s.file->size && s.length <= kMaxFileBytes && s.length > 0;
    }
    // Reads seg's file into the buffer (sending what is buffered first when it is full).
    void add(const Segment& seg);
    // Sends what is buffered; more: another frame follows at once (MSG_MORE).
    void flush(bool more);

private:
    int sock_;
    SourceReader& reader_;
    AlignedBuffer buf_;
    size_t used_ = 0;
};

} // namespace sluice
