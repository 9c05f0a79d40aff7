#pragma once
// Blocks of files that are not in the page cache, read with O_DIRECT into aligned buffers a
// stream keeps, with the stream's next block's read on the disk meanwhile (issue 19, then
// issue 18 for encrypted streams). What a send path does with the bytes is its own: the clear
// path hashes and sends them from the buffer (cold_block_sender.hpp), an encrypted stream
// seals them into its record slots (tls_record_sender.cpp). Both would otherwise read every
// byte of a set larger than memory into freshly allocated page-cache pages, synchronously:
// 2.33 CPU s/GB for splice (docs/benchmarks.md, "Issue 19 (h19d, session 10)"), 0.91-0.94
// s/GB for the encrypted sender with the disk waiting between its reads (h18o, session 16).
//
// Three buffers of one block each: the current block's, one the caller may have lent out
// (a send from it still in flight: lend()), and one the next block is read into ahead
// (IORING_OP_READ on the reader's ring) as soon as the current block's data is in, so the
// disk reads while the caller hashes, seals and sends.
//
// Cached blocks are left to the caller's path (read() returns false): from the page cache the
// clear paths move them with no copy at all, and an encrypted stream copies them once either
// way. Decided per block with cachestat(2): a block not wholly cached is read from the disk
// (O_DIRECT flushes dirty pages of the range first, so what is read is the file's current
// content).
//
// Everything that keeps a cold block on the page-cache path is said in fallback(): no
// cachestat(2) (older kernel), a file system that refuses O_DIRECT, a block larger than
// kMaxBlockBytes. A block at an offset that is not a multiple of kAlign (a caller's fd source
// at such an offset, a sparse file's data extent) is counted in unaligned().
#include <cstdint>
#include <optional>
#include <string>

#include "core/io/aligned_buffer.hpp"
#include "core/io/unique_fd.hpp"
#include "core/ring/ring.hpp"
#include "send/plan/work_queue.hpp"

namespace sluice {

class DirectBlockReader {
public:
    // O_DIRECT alignment of file offsets, buffer addresses and read lengths.
    static constexpr uint64_t kAlign = 4096;
    // Larger blocks (--block-size) stay on the page-cache path: a buffer holds one block.
    static constexpr uint64_t kMaxBlockBytes = uint64_t{64} << 20;
    // Room before each block's data, aligned for O_DIRECT: a caller may put a frame's prefix
    // there and send prefix and data as one.
    static constexpr size_t kHead = kAlign;

    DirectBlockReader();
    ~DirectBlockReader();
    DirectBlockReader(const DirectBlockReader&) = delete;
    DirectBlockReader& operator=(const DirectBlockReader&) = delete;

    // Reads seg's block with O_DIRECT if its range is not wholly in the page cache: true, and
    // data() holds its seg.length bytes, checked to be the file as listed (a file that shrank,
    // grew or was rewritten since is an Error(source) naming it, never sent torn). false, with
    // nothing read and no read of this reader in flight: the caller reads the block through
    // the page cache (cached, or refused: said in fallback() or unaligned()).
    // next: the block the caller reads after this one, if it knows it; read ahead when cold.
    bool read(const Segment& seg, const Segment* next);
    // The block read last: kHead bytes of room before it, whole kAlign units after it.
    unsigned char* data() { return bufs_[cur_]->data() + kHead; }

    // The current block's buffer is in use (a send from it in flight) until give_back(): the
    // reads that follow go to the other buffers. One at a time.
    void lend() { lent_ = cur_; }
    void give_back() { lent_ = -1; }
    // Waits for a read queued ahead, if any, and forgets it (the caller reads elsewhere next).
    void drop_ahead();
    // The reader's ring (nullptr where io_uring is unavailable): a caller may queue its own
    // requests on it (the clear path's sends), whose completions a wait here reaps and the
    // other way round. Torn down first by stop().
    Ring* ring() { return ring_ ? &*ring_ : nullptr; }
    // Tears the ring down, cancelling what is in flight on it (an error unwinding): before
    // any buffer or Completion its requests use goes.
    void stop();

    uint64_t blocks() const noexcept { return blocks_; }
    uint64_t bytes() const noexcept { return bytes_; }
    uint64_t unaligned() const noexcept { return unaligned_; }
    // Blocks taken from a read queued ahead (sent from it, or refused there as changed).
    uint64_t read_ahead() const noexcept { return ahead_used_; }
    // Reads queued ahead on the fd already open for the same file (no open of their own).
    uint64_t ahead_on_open_fd() const noexcept { return ahead_reused_; }
    // Why cold blocks went through the page cache, if they did (empty otherwise).
    const std::string& fallback() const noexcept { return fallback_; }

private:
    // read()'s work: false (nothing read) when the block is to go on the caller's path.
    bool read_cold(const Segment& seg, const Segment* next);
    // The O_DIRECT fd of f, opened on first use and kept while the blocks are f's; false when
    // the file system refuses O_DIRECT.
    bool open(const SourceFile& f);
    void close();
    // Whether seg's block can be read with O_DIRECT into a buffer (aligned, not too large);
    // count: a refusal is counted in unaligned() or said in fallback().
    bool fits(const Segment& seg, bool count);
    // Whether seg's block is not wholly in the page cache, asked of fd.
    bool cold(const Segment& seg, int fd);
    // Queues the read of seg's block into a free buffer on its own fd, if it is cold and its file
    // opens unchanged since it was listed (a guess: a failure is the block's own read's to report).
    void start_ahead(const Segment& seg);
    // Queues the read of seg's block on fd into a free buffer; seg's file is held until the
    // read is taken or dropped.
    void queue_ahead(const Segment& seg, int fd);
    // The read queued ahead, if it is seg's: waited for, its fd and buffer become the current
    // ones and true; otherwise it is waited for and dropped, and false.
    bool take_ahead(const Segment& seg);
    // Reads length bytes at file offset `at` into the buffer, got saying how many (fewer: the
    // file ended); false when the read was refused as O_DIRECT (EINVAL) before any byte.
    // got: bytes already in the buffer (a read ahead that came back short).
    bool read_rest(const SourceFile& f, uint64_t at, uint64_t length, uint64_t& got);
    // A buffer neither holding the current block, nor lent, nor read into ahead; sized.
    int free_buffer(uint64_t length);

    static constexpr uint64_t kHugeFrom = uint64_t{512} << 10; // blocks given a 2 MiB buffer at least
    static constexpr int kBuffers = 3;
    std::optional<AlignedBuffer> bufs_[kBuffers]; // one block each, allocated on first use
    int cur_ = 0;                                 // the buffer the current block is read into
    int lent_ = -1;                               // the buffer the caller still uses
    // The read queued ahead: its block, file (held), fd and buffer (-1: none). ahead_fd_ is
    // empty when the read is on fd_ (the same file's next block).
    Segment ahead_seg_;
    UniqueFd ahead_fd_;
    int ahead_buf_ = -1;
    uint64_t ahead_used_ = 0;
    uint64_t ahead_reused_ = 0;
    const SourceFile* file_ = nullptr; // held (SourceFile::hold) while fd_ is its
    UniqueFd fd_;
    uint64_t blocks_ = 0;
    uint64_t bytes_ = 0;
    uint64_t unaligned_ = 0;
    bool works_ = true; // cachestat(2) and O_DIRECT both available
    std::string fallback_;
    Completion ahead_read_;
    bool can_read_ahead_ = false; // the ring has IORING_OP_READ
    std::optional<Ring> ring_;    // after what its requests use: torn down (cancelling them) first
};

} // namespace sluice
