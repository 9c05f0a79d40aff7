#pragma once
// Blocks of files that are not in the page cache, sent the way the small-file batch sends
// cold files (issue 19): read with O_DIRECT into an aligned buffer the stream keeps, hashed
// there, and sent from it. No page-cache pages are filled and nothing is read twice.
//
// Three buffers of one block each: a block's send is queued on the stream's ring
// (IORING_OP_SEND) and runs while the next block is read into another buffer, so the disk
// and the socket work at once (with one buffer, a stream read, then waited for the receiver,
// then read again: 112 files/s on the small set at full size against WDT's 211). The caller
// names the block it will send next, and its read is queued on the ring (IORING_OP_READ) into
// the third buffer as soon as this block's data is in: the stream's next read is on the disk
// while it hashes and sends this block, where before the disk waited for that stream between
// blocks (a local copy of the small set ran 15% faster with 8 reads in flight than with 4:
// docs/benchmarks.md, "Issue 19 (h19i, session 14)"). At most one send is in flight, so
// blocks keep their order; drain() waits for it, and every other writer of the socket calls
// drain() first. The splice and sendfile paths instead read a block once for its checksum and then
// move it from the page cache; on a cold set larger than memory every byte then lands in
// freshly allocated page-cache pages, which cost the sender 2.33 CPU s/GB on the WDT
// report's small set at full size (docs/benchmarks.md, "Issue 19 (h19d, session 10)").
//
// Cached blocks are left to the stream's path (try_send() returns false): from the page
// cache, splice moves them with no copy at all. Decided per block with cachestat(2): a block
// not wholly cached is read from the disk (O_DIRECT flushes dirty pages of the range first,
// so what is read is the file's current content).
//
// Everything that keeps a cold block on the page-cache path is said in fallback(): no
// cachestat(2) (older kernel), a file system that refuses O_DIRECT, a block larger than
// kMaxBlockBytes. A block at an offset that is not a multiple of kAlign (a caller's fd
// source at such an offset) is counted in unaligned().
#include <cstdint>
#include <optional>
#include <string>

#include "core/io/aligned_buffer.hpp"
#include "core/io/unique_fd.hpp"
#include "core/ring/ring.hpp"
#include "send/plan/work_queue.hpp"

namespace sluice {

class ColdBlockSender {
public:
    // O_DIRECT alignment of file offsets, buffer addresses and read lengths.
    static constexpr uint64_t kAlign = 4096;
    // Larger blocks (--block-size) stay on the page-cache path: the buffer holds one block.
    static constexpr uint64_t kMaxBlockBytes = uint64_t{64} << 20;

    // idle_timeout_ms bounds the wait for the receiver to take a block (--idle-timeout).
    ColdBlockSender(int sock, int idle_timeout_ms);
    ~ColdBlockSender();
    ColdBlockSender(const ColdBlockSender&) = delete;
    ColdBlockSender& operator=(const ColdBlockSender&) = delete;

    // Sends seg as one BLOCK frame if its range is not wholly in the page cache; returns false,
    // having sent nothing, when the block is cached (or cannot be read with O_DIRECT): the
    // caller sends it on its path (and nothing of this sender is still in flight). more:
    // another frame follows at once (MSG_MORE). A block sent may still be on its way: drain().
    // next: the block the caller sends after this one, if it knows it; read ahead when cold.
    bool try_send(const Segment& seg, bool more, const Segment* next = nullptr);
    // Waits until the block in flight, if any, is in the socket: before anything else writes to
    // it, and at the end. A receiver that takes nothing for the idle timeout is an error.
    void drain();

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
    // The O_DIRECT fd of f, opened on first use and kept while the blocks are f's; false when
    // the file system refuses O_DIRECT.
    bool open(const SourceFile& f);
    // try_send's work: false (nothing read) when the block is to go on the caller's path.
    bool try_cold(const Segment& seg, bool more, const Segment* next);
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
    void drop_ahead();
    // Reads length bytes at file offset `at` into the buffer, got saying how many (fewer: the
    // file ended); false when the read was refused as O_DIRECT (EINVAL) before any byte.
    // got: bytes already in the buffer (a read ahead that came back short).
    bool read(const SourceFile& f, uint64_t at, uint64_t length, uint64_t& got);
    // Sends the frame at `at` (prefix and data, contiguous): queued on the ring, or at once
    // where io_uring sends are unavailable.
    void send(unsigned char* at, size_t length, bool more);
    unsigned char* data() { return bufs_[cur_]->data() + kHead; }
    // A buffer neither holding the current block, nor sending, nor read into ahead; sized.
    int free_buffer(uint64_t length);

    // The prefix sits just before the data, which starts kHead bytes into a buffer (aligned
    // for O_DIRECT): the frame goes out with one send.
    static constexpr size_t kHead = kAlign;
    int sock_;
    int idle_timeout_ms_;
    static constexpr int kBuffers = 3;
    std::optional<AlignedBuffer> bufs_[kBuffers]; // one block each, allocated on first use
    int cur_ = 0;                                 // the buffer the current block is read into
    int sending_buf_ = -1;                        // the buffer of the frame in flight
    // The read queued ahead: its block, file (held), fd and buffer (-1: none). ahead_fd_ is
    // empty when the read is on fd_ (the same file's next block).
    Segment ahead_seg_;
    UniqueFd ahead_fd_;
    int ahead_buf_ = -1;
    uint64_t ahead_used_ = 0;
    uint64_t ahead_reused_ = 0;
    unsigned char* sending_ = nullptr;     // the frame in flight and its length
    size_t sending_len_ = 0;
    int sending_flags_ = 0;
    const SourceFile* sending_file_ = nullptr; // its file, held (SourceFile::hold) until it is out
    const SourceFile* file_ = nullptr; // held (SourceFile::hold) while fd_ is its
    UniqueFd fd_;
    uint64_t blocks_ = 0;
    uint64_t bytes_ = 0;
    uint64_t unaligned_ = 0;
    bool works_ = true; // cachestat(2) and O_DIRECT both available
    std::string fallback_;
    Completion send_;
    Completion ahead_read_;
    bool can_read_ahead_ = false; // the ring has IORING_OP_READ
    std::optional<Ring> ring_; // after what its request uses: torn down (cancelling it) first
};

} // namespace sluice
