#pragma once
// Small whole files sent the cheap way: no per-file mmap (page-table set-up, munmap and its TLB
// flush) for the checksum and no splices handed to io-wq workers, which cost more than the
// copies they save on files of a few pages (docs/benchmarks.md, issue 5). Each file is read
// into the stream's buffer, checksummed there, and sent behind its BLOCK prefix, many files per
// send (a system call costs more than copying). The wire format is unchanged: consecutive BLOCK
// frames.
//
// Many reads in flight (issue 19): at a transfer's full size the files are not cached, and one
// pread at a time per stream left the disk waiting on the sender. add() only queues a file's
// read on the stream's ring and returns; the buffer is cut into chunks, and a chunk goes out
// once every read in it has completed, while the reads of the next chunks run.
//
// How a file is read:
//  - not in the page cache (cachestat(2)): with O_DIRECT, straight from the disk into the
//    buffer. Read through the page cache, the set would fill memory (every later read landing in
//    pages the kernel has not handed out for a long time), and dropping each file's pages after
//    the read (POSIX_FADV_DONTNEED) cost a fifth of the sender's time. Where the file system
//    refuses O_DIRECT, the read goes through the page cache and the pages are dropped after it
//    (said in fallback());
//  - cached, up to kInlineBytes: read from the page cache into the buffer;
//  - cached and larger: read for its checksum only, its data sent with sendfile (one copy less;
//    at 1 Gbit/s the send copy was a quarter of the sender's CPU on the minor set). The reads in
//    flight are drained and sent first, so the files of a stream keep their order.
#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/checksum/xxh3.hpp"
#include "core/io/aligned_buffer.hpp"
#include "core/io/unique_fd.hpp"
#include "core/ring/ring.hpp"
#include "send/paths/source_reader.hpp"
#include "send/plan/work_queue.hpp"

namespace sluice::tls {
class RecordWriter;
}

namespace sluice {

class SmallFileBatch {
public:
    // Files up to this size go through the batch (when they are sent whole).
    static constexpr uint64_t kMaxFileBytes = 512 * 1024;
    static constexpr uint64_t kInlineBytes = 64 * 1024;
    // The buffer: kChunks chunks, each sent with one sendmsg once its reads are in.
    static constexpr size_t kChunkBytes = 1 << 20;
    static constexpr size_t kChunks = 4;
    static constexpr size_t kBufferBytes = kChunkBytes * kChunks;
    // O_DIRECT alignment of buffer addresses and read lengths (a multiple of every block
    // device's logical block size in use).
    static constexpr size_t kAlign = 4096;
    // Reads (and so source fds) in flight per stream at most.
    static constexpr unsigned kMaxReads = 32;
    // The buffer is on small pages until the batch has carried this many bytes (then on huge
    // pages from its next empty moment): a stream carrying an update's few small files
    // rotates through all four chunks, and on huge pages from the start that zeroed 2 x 2 MiB
    // per stream, 16 MiB for 4 streams, 17% of the sender's CPU in a 1% update of the minor set
    // at 1/8 (perf, docs/benchmarks.md, h17s); on small pages only the pages used are zeroed
    // (the receiver's direct_buffers.hpp does the same, session 14).
    static constexpr uint64_t kGrowAfter = uint64_t{32} << 20;

    explicit SmallFileBatch(int sock);
    ~SmallFileBatch();
    // Encrypted (tls_record_sender.cpp's stream): what would go to the socket goes into w's
    // records instead, sealed and sent by it. Files up to kInlineBytes and uncached ones sit at
    // 4 KiB-aligned places of the buffer (O_DIRECT), not in record slots: the whole records of
    // them are encrypted from there into the slots (RecordWriter::write), the pieces that share
    // a record with the next file copied first. Cached files above kInlineBytes are read
    // straight into the records (read_into_records).
    void send_through(tls::RecordWriter* w) { records_ = w; }

    // The -v line that says how the unencrypted paths read files (this batch and cold blocks).
    static std::string reads_line();
    static bool fits(const Segment& s) {
        return s.offset == 0 && s.length == s.file->size && s.length <= kMaxFileBytes && s.length > 0;
    }
    // Queues the read of seg's file (sending earlier files when the buffer is full). Takes over
    // the segment's hold on its file (SourceFile::hold) and lets go once the file is sent.
    void add(const Segment& seg);
    // Waits for every read queued and sends all; more: another frame follows at once (MSG_MORE).
    void flush(bool more);
    // Files read with O_DIRECT (not cached before); files read through the page cache whose
    // pages were dropped after the read (O_DIRECT refused).
    uint64_t direct_reads() const noexcept { return direct_reads_; }
    uint64_t direct_bytes() const noexcept { return direct_bytes_; }
    uint64_t dropped() const noexcept { return dropped_; }
    // Why cold files were read through the page cache, if they were (empty otherwise).
    const std::string& fallback() const noexcept { return fallback_; }

private:
    struct Slot;
    struct Chunk {
        size_t used = 0;   // bytes of the chunk taken
        size_t first = 0;  // its first slot (slots are taken in order, as a ring)
        size_t files = 0;  // slots it holds
    };
    void send_cached_large(const Segment& seg, UniqueFd fd);
    void read_into_records(const Segment& seg, int fd);
    // Makes room for a file of length bytes; returns where its prefix goes.
    unsigned char* place(uint64_t length);
    // Waits for the reads of the oldest chunk and sends it.
    void send_oldest(bool more);
    void queue_read(Slot& s);
    void reap_one();
    void finish_read(Slot& s);
    // Whether to read it through the page cache: all of it cached, or some of it dirty.
    bool fully_cached(int fd, uint64_t length);
    bool make_direct(int fd);

    int sock_;
    tls::RecordWriter* records_ = nullptr;
    Xxh3 hash_; // read_into_records()
    AlignedBuffer buf_;     // declared before the ring and the slots: reads land in it
    uint64_t carried_ = 0;  // bytes placed in buf_ until it grows to huge pages
    bool grown_ = false;
    AlignedBuffer scratch_; // a cached larger file's bytes, read only for its checksum
    std::optional<Ring> ring_; // none where io_uring reads are unavailable: reads one at a time
    std::unique_ptr<Slot[]> slots_; // its Completions go before the ring
    size_t slot_count_;
    size_t next_slot_ = 0;   // the next slot to take
    size_t chunk_head_ = 0;  // the oldest chunk not yet sent
    size_t chunks_open_ = 0; // chunks holding files not yet sent
    Chunk chunks_[kChunks];
    unsigned reads_ = 0; // reads in flight
    std::vector<iovec> iov_;
    uint64_t direct_reads_ = 0;
    uint64_t direct_bytes_ = 0;
    uint64_t dropped_ = 0;
    bool cachestat_works_ = true;
    bool direct_works_ = true;
    std::string fallback_;
};

} // namespace sluice
