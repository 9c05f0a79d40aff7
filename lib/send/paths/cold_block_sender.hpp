#pragma once
// Blocks of files that are not in the page cache, sent the way the small-file batch sends
// cold files (issue 19): read with O_DIRECT into an aligned buffer the stream keeps
// (direct_block_reader.hpp, which also has the next block's read on the disk meanwhile),
// hashed there, and sent from it. No page-cache pages are filled and nothing is read twice.
//
// A block's send is queued on the reader's ring (IORING_OP_SEND) and runs while the next
// block is read into another buffer, so the disk and the socket work at once (with one
// buffer, a stream read, then waited for the receiver, then read again: 112 files/s on the
// small set at full size against WDT's 211; a local copy of the small set ran 15% faster with
// 8 reads in flight than with 4: docs/benchmarks.md, "Issue 19 (h19i, session 14)"). At most
// one send is in flight, so blocks keep their order; drain() waits for it, and every other
// writer of the socket calls drain() first. The splice and sendfile paths instead read a block
// once for its checksum and then move it from the page cache; on a cold set larger than
// memory every byte then lands in freshly allocated page-cache pages, which cost the sender
// 2.33 CPU s/GB on the WDT report's small set at full size (docs/benchmarks.md, "Issue 19
// (h19d, session 10)").
//
// Cached blocks, and cold ones the reader refuses (said in its fallback()), are left to the
// stream's path (try_send() returns false): from the page cache, splice moves them with no copy.
#include <cstdint>
#include <string>

#include "send/paths/direct_block_reader.hpp"
#include "send/plan/work_queue.hpp"

namespace sluice {

class ColdBlockSender {
public:
    static constexpr uint64_t kAlign = DirectBlockReader::kAlign;
    static constexpr uint64_t kMaxBlockBytes = DirectBlockReader::kMaxBlockBytes;

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

    uint64_t blocks() const noexcept { return reader_.blocks(); }
    uint64_t bytes() const noexcept { return reader_.bytes(); }
    uint64_t unaligned() const noexcept { return reader_.unaligned(); }
    uint64_t read_ahead() const noexcept { return reader_.read_ahead(); }
    uint64_t ahead_on_open_fd() const noexcept { return reader_.ahead_on_open_fd(); }
    const std::string& fallback() const noexcept { return reader_.fallback(); }
    // The reads (direct_block_reader.hpp), for the stream's counts.
    const DirectBlockReader& reader() const noexcept { return reader_; }

private:
    // Sends the frame at `at` (prefix and data, contiguous): queued on the ring, or at once
    // where io_uring sends are unavailable.
    void send(unsigned char* at, size_t length, bool more);

    int sock_;
    int idle_timeout_ms_;
    DirectBlockReader reader_; // its ring carries the sends too; torn down first (~ColdBlockSender)
    bool ring_sends_ = false;  // the ring has IORING_OP_SEND
    unsigned char* sending_ = nullptr; // the frame in flight and its length
    size_t sending_len_ = 0;
    int sending_flags_ = 0;
    const SourceFile* sending_file_ = nullptr; // its file, held (SourceFile::hold) until it is out
    Completion send_;
};

} // namespace sluice
