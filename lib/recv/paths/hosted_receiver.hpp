#pragma once
// Receive path "hosted": one data stream whose socket another loop reads (a `sluice serve`
// ring: core/session/hosted_streams.hpp). Each receive lands in the stream's buffer (or, when
// encrypted, its record buffer, opened into that buffer: AES-GCM is the copy); the blocks parsed
// from it are summed while hot and written at their offsets, then verified, journaled and
// finished by the same steps as every path (file_finisher.cpp). A file of 1 MiB or more is
// written as the direct path writes it (direct_layout.hpp): its whole pages with O_DIRECT from
// a page-aligned staging buffer the block's bytes are copied into (encrypted, a record whose
// content is all block data is opened straight into it instead: AES-GCM is then the one copy;
// in clear a copy in user space, where
// buffered writes into fresh page-cache pages ran at a fifth of O_DIRECT's rate on this
// project's VM: docs/benchmarks.md), the pages it shares with a neighbouring block through the
// page cache; a smaller file that arrives whole in one block into an unnamed inode, its whole
// pages with O_DIRECT from the stage too (small_direct_files.hpp), linked in place once
// verified; any other with pwrite, through the writeback window. One receive in flight,
// the next armed once the last one's bytes are parsed; the O_DIRECT chunk it completed is
// written by the loop meanwhile (next_write/wrote: one such write at a time, from the stage
// not being filled; its block's verdict waits for it). The stream holds its buffers whatever
// the sender does. Within a
// block the receive waits under a low-water mark (marked_wait.hpp), as recv_write's does.
#include <optional>
#include <vector>

#include "core/checksum/xxh3.hpp"
#include "core/io/aligned_buffer.hpp"
#include "core/session/hosted_streams.hpp"
#include "core/tls/record_reader.hpp"
#include "core/wire/data_parser.hpp"
#include "recv/paths/direct_fallbacks.hpp"
#include "recv/paths/direct_layout.hpp"
#include "recv/paths/marked_wait.hpp"
#include "recv/paths/small_direct_files.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "recv/paths/writeback_window.hpp"

namespace sluice {

inline constexpr const char* kHostedRecvPath = "hosted";
inline constexpr const char* kRecordsHostedRecvPath = "tls_hosted";

class HostedReceiver final : wire::DataFrameHandler {
public:
    // keys: the stream is encrypted (its handshake is done); null: clear.
    HostedReceiver(int sock, unsigned index, RecvContext& ctx, const tls::LinkKeys* keys);
    // HostedStream's steps (see there).
    HostedStream::Read next_read();
    bool timed_out();
    bool received(size_t n);
    HostedStream::Write next_write();
    void wrote(int res);
    Error broke(int err) const;
    // After a break (nothing is in flight between receives): the block cut short is disowned
    // (the sender sends it again, on any stream) and the blocks that arrived whole are counted.
    StreamReceipt settle_after_break();
    StreamReceipt receipt() const { return {parser_.counts().blocks, parser_.counts().bytes}; }
    // Why a slower way was used, if it was (StreamReceiver::fallback).
    std::string fallback() const {
        DirectFallbacks fb = fb_;
        fb.small = small_.fallback();
        return fb.text();
    }

private:
    void block_begin(const wire::BlockPrefix& p, uint32_t len) override;
    void block_data(std::span<const unsigned char> d) override;
    void block_end() override;
    void stream_end(const wire::StreamCounts&) override {}
    void switch_file(RecvFile& f, bool whole);
    // Where the next `room` bytes of the block begun go in the stage, when they are all its data
    // and fit the chunk staged (begun here if the last one is full); else null.
    unsigned char* place(size_t room);
    void write_chunk(const RecvFile& f); // the staged chunk, complete: its pages to the file
    // The verdict of the block begun, now or (a chunk of it still being written by the loop)
    // once that write lands.
    void verdict(RecvFile& f, uint64_t off, uint64_t len, uint64_t sum, bool ok, int fd);

    int sock_;
    unsigned index_;
    RecvContext& ctx_;
    AlignedBuffer buf_;
    ParentDirCache dirs_;
    Xxh3 xxh_;
    MarkedWait wait_;
    MarkedWait::Plan plan_{}; // of the receive in flight
    wire::DataFrameParser parser_;
    std::optional<tls::RecordReader> records_; // encrypted: what the socket is read into
    FileTable::Hold& hold_;
    RecvFile* block_file_ = nullptr; // the block begun (claimed: FileTable::claim) until its end
    uint64_t block_off_ = 0, block_len_ = 0, block_sum_ = 0, write_pos_ = 0;
    StreamReceipt whole_; // blocks that arrived whole (a reconnect's STREAM_RESUME)
    RecvFile* open_file_ = nullptr;
    UniqueFd open_fd_;   // buffered: small files, shared pages, and finishing
    UniqueFd direct_fd_; // O_DIRECT, for a file of 1 MiB or more (else closed)
    bool small_open_ = false; // open_fd_ is an unnamed small file staged whole, written at its block's end
    SmallDirectFiles small_;
    // Two stages: the chunk of the block being staged for O_DIRECT, and at most one whole chunk
    // the loop writes meanwhile (async_); a chunk completed while that write is out is written
    // here at once, so one write per stream is ever out and one block's verdict waits for it.
    AlignedBuffer stages_[2];
    unsigned cur_ = 0;                 // the stage being filled
    AlignedBuffer& stage() { return stages_[cur_]; }
    HostedStream::Write async_{};      // the write left to the loop (len 0: none)
    bool async_out_ = false;           // the loop has it (next_write() gave it)
    bool async_current_ = false;       // it holds bytes of the block begun
    const RecvFile* async_file_ = nullptr; // its file, for an error
    struct Verdict {
        RecvFile* file = nullptr; // null: none
        uint64_t off = 0, len = 0, sum = 0;
        bool ok = false;
    } deferred_;                       // the block whose last async write is out
    UniqueFd held_direct_, held_open_; // the async write's file, after the stream moved on
    direct_layout::Chunk chunk_{}; // and which bytes of the file it holds
    size_t staged_ = 0;            // of chunk_.length, copied so far
    uint64_t block_end_ = 0;
    bool allocate_refused_ = false;
    DirectFallbacks fb_;
    WritebackWindow written_;
};

} // namespace sluice
