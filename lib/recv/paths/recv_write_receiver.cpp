// Receive path "recv_write" (and "null"): the socket is read into one of two user buffers
// with IORING_OP_RECV while the blocks parsed from the other buffer are written at their
// offsets with IORING_OP_WRITE, all in one submit. One CPU copy (socket -> user) plus the
// page-cache write; the checksum is computed on the buffer while it is hot. Within a block the
// receive waits under a low-water mark for the bytes still owed (marked_wait.hpp): without one
// it woke per ~8 KB at 150 ms with 64 streams (issue 16, h16h).
//
// Encrypted (docs/design.md, "Encryption"): the socket is read into the stream's record
// buffer instead (core/tls/record_reader.hpp), and each whole record is opened from there
// into the buffer the blocks are parsed and written from: AES-GCM is the copy, no relay.

#include <cstring>
#include <optional>
#include <vector>

#include "core/io/aligned_buffer.hpp"
#include "core/io/sys_error.hpp"
#include "recv/paths/marked_wait.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "recv/paths/writeback_window.hpp"
#include "core/checksum/xxh3.hpp"
#include "core/ring/ring.hpp"
#include "core/wire/data_parser.hpp"
#include "core/tls/record_reader.hpp"

namespace sluice {

namespace {

constexpr size_t kBufferBytes = 2 << 20;

class RecvWriteReceiver final : public StreamReceiver, wire::DataFrameHandler {
    struct Block {
        RecvFile* file = nullptr;
        uint64_t offset = 0;
        uint64_t length = 0;
        uint64_t checksum = 0;
    };
    struct Verdict {
        Block block;
        uint64_t digest;
    };
    struct PendingWrite {
        int fd;
        const unsigned char* data;
        uint32_t len;
        uint64_t offset;
        RecvFile* file;
    };
    // Writes in flight at once; a buffer of tiny files holds thousands, which go in waves.
    static constexpr unsigned kWriteSlots = 128;

public:
    RecvWriteReceiver(int sock, unsigned index, RecvContext& ctx, bool discard, const tls::LinkKeys* keys)
        : sock_(sock), index_(index), ctx_(ctx),
          discard_(discard), bufs_{AlignedBuffer(kBufferBytes), AlignedBuffer(kBufferBytes)}, dirs_(ctx.tree), ring_(256) {
        if (keys) records_.emplace(keys->rx, "data stream " + std::to_string(index), kBufferBytes);
        writes_.reserve(1024);
        done_.reserve(1024);
    }

    StreamReceipt run() override {
        int cur = 0;
        queue_recv(cur);
        ring_.submit();
        size_t n = wait_recv();
        for (;;) {
            if (n == 0) {
                if (parser_.ended() && !(records_ && records_->mid_record())) break;
                throw stream_cut_short(index_);
            }
            if (records_) n = records_->open(n, bufs_[cur].data());
            parser_.feed(std::span<const unsigned char>(bufs_[cur].data(), n), *this);
            const bool more = !parser_.ended();
            // The next recv goes in with this buffer's writes (one submit), but blocks are
            // verified and files finished as soon as their writes are reaped, not when the
            // sender next sends something.
            if (more) queue_recv(1 - cur);
            write_and_reap();
            finish_blocks();
            if (!more) break;
            n = wait_recv();
            cur = 1 - cur;
        }
        if (records_ && records_->mid_record()) parser_.reader().data_after_end(); // part of a record after STREAM_END
        wire::refuse_data_after_end(parser_.reader(), sock_);
        return {parser_.counts().blocks, parser_.counts().bytes};
    }

    // A break is only ever seen waiting for the socket (wait_recv), after the blocks parsed so
    // far were written and finished: nothing is in flight then. Anything else is no break.
    std::optional<StreamReceipt> settle_after_break() override {
        if (!done_.empty() || !writes_.empty() || recv_.busy() || recv_timeout_.busy()) return std::nullopt;
        // The block cut short is the sender's to send again, on any stream: its claim goes
        // before STREAM_RESUME tells the sender so.
        if (in_block_) ctx_.files.disown(*block_.file, block_.offset, block_.length);
        in_block_ = false;
        return whole_;
    }

private:
    // --- parser events: build the batch of writes and block verdicts for this buffer ---
    void block_begin(const wire::BlockPrefix& p, uint32_t len) override {
        // Every file of this buffer's blocks is kept (done_, retired_) until finish_blocks():
        // named, from the lowest id to the highest, before the lookup (FileTable::Hold).
        hold_.widen(p.file_id);
        last_id_ = p.file_id;
        RecvFile& f = file_for_block(ctx_.files, p, len);
        block_ = {&f, p.offset, len, p.checksum};
        in_block_ = true;
        write_pos_ = p.offset;
        xxh_.reset();
        if (!discard_ && open_file_ != &f) {
            if (open_file_) retired_.push_back({open_file_, std::move(open_fd_)});
            open_fd_ = open_temp_file(dirs_, f);
            open_file_ = &f;
        }
    }
    void block_data(std::span<const unsigned char> d) override {
        xxh_.update(d.data(), d.size());
        if (!discard_) writes_.push_back({open_fd_.get(), d.data(), static_cast<uint32_t>(d.size()), write_pos_, block_.file});
        write_pos_ += d.size();
        ctx_.bytes_received.fetch_add(d.size(), std::memory_order_relaxed);
        if (ctx_.progress) ctx_.progress->bytes_done.fetch_add(d.size(), std::memory_order_relaxed);
    }
    void block_end() override {
        done_.push_back({block_, xxh_.digest()});
        in_block_ = false;
        ++whole_.blocks;
        whole_.bytes += block_.length;
    }
    void stream_end(const wire::StreamCounts&) override {}

    // --- ring work ---
    void queue_recv(int buf) {
        recv_buf_ = buf;
        // Marked for the rest of the frame begun (the parser has every byte received so far).
        // Not encrypted streams: part of a record held undecrypted is received but not parsed,
        // so the plain bytes owed overstate the bytes still to come.
        plan_ = wait_.arm(records_ ? 0 : static_cast<size_t>(parser_.owed()));
        auto chain = ring_.chain(2);
        if (records_)
            ring_.recv(recv_, sock_, records_->room(), records_->room_bytes(), 0);
        else
            ring_.recv(recv_, sock_, bufs_[buf].data(), kBufferBytes, 0, plan_.marked);
        ring_.link_timeout(recv_timeout_, *plan_.timeout);
    }

    size_t recv_result() {
        switch (recv_.outcome()) {
        case Completion::Outcome::ok: break;
        case Completion::Outcome::cancelled: throw stream_went_silent(index_, ctx_);
        case Completion::Outcome::retry: // wait_recv queued it again
        case Completion::Outcome::failed: throw_errno(ErrorCode::network, "data stream " + std::to_string(index_), recv_.error());
        }
        return static_cast<size_t>(recv_.result());
    }

    // Submits this buffer's writes, kWriteSlots at a time, and reaps them; the recv may
    // complete meanwhile and keeps its result in its completion.
    void write_and_reap() {
        size_t next = 0, left = writes_.size();
        for (unsigned i = 0; i < kWriteSlots; ++i) free_slots_[i] = i;
        unsigned free = kWriteSlots;
        for (;;) {
            while (free && next < writes_.size()) {
                Completion& slot = slots_[free_slots_[--free]];
                slot.tag = next++;
                queue_write(slot);
            }
            if (!left) break;
            Completion& done = ring_.wait();
            if (&done == &recv_ || &done == &recv_timeout_) continue;
            if (done.outcome() == Completion::Outcome::retry) {
                queue_write(done);
                continue;
            }
            complete_write(writes_[done.tag], done);
            free_slots_[free++] = static_cast<unsigned>(&done - slots_);
            --left;
        }
        writes_.clear();
    }

    void queue_write(Completion& slot) {
        const PendingWrite& w = writes_[slot.tag];
        ring_.write(slot, w.fd, w.data, w.len, w.offset);
    }

    // Waits until both the recv and its link timeout have completed; returns bytes received.
    size_t wait_recv() {
        for (;;) {
            while (recv_.busy() || recv_timeout_.busy()) ring_.wait();
            // The mark's deadline (take what is there), or a slice of silence (not yet the idle
            // timeout, or one the receiver excuses).
            const bool excused = recv_.outcome() == Completion::Outcome::cancelled && wait_.wait_again(plan_);
            if (recv_.outcome() != Completion::Outcome::retry && !excused) {
                const size_t n = recv_result();
                wait_.took(plan_, n);
                return n;
            }
            queue_recv(recv_buf_);
        }
    }

    void complete_write(const PendingWrite& w, const Completion& c) {
        if (c.outcome() != Completion::Outcome::ok)
            throw_errno(ErrorCode::destination, "cannot write '" + w.file->entry.path + "'", c.error());
        // A short write means the next one fails (no space, quota): let pwrite name the error.
        size_t done = static_cast<size_t>(c.result());
        while (done < w.len) {
            ssize_t n = ::pwrite(w.fd, w.data + done, w.len - done, static_cast<off_t>(w.offset + done));
            if (n < 0) throw_errno(ErrorCode::destination, "cannot write '" + w.file->entry.path + "'");
            if (n == 0) throw Error(ErrorCode::destination, "cannot write '" + w.file->entry.path + "': no progress");
            done += static_cast<size_t>(n);
        }
    }

    // Blocks whose data is now written: record them, and finish files they complete.
    void finish_blocks() {
        for (const Verdict& v : done_) {
            const Block& b = v.block;
            if (v.digest != b.checksum) {
                block_failed(ctx_, *b.file, b.offset, b.length);
                continue;
            }
            block_verified(ctx_, dirs_, *b.file, discard_ ? -1 : fd_of(b.file), b.offset, b.length, b.checksum);
        }
        done_.clear();
        // Files this stream has moved past are written: their pages go through the window
        // instead of staying cached (writeback_window.hpp).
        for (auto& [rf, fd] : retired_) written_.add(std::move(fd), rf->entry.size);
        retired_.clear();
        // From here only the last block's file is kept (open, or its block still arriving).
        if (last_id_ != kNoId) hold_.narrow(last_id_);
    }

    int fd_of(RecvFile* f) {
        if (open_file_ == f) return open_fd_.get();
        for (auto& [rf, fd] : retired_)
            if (rf == f) return fd.get();
        throw Error(ErrorCode::internal, "no open file for '" + f->entry.path + "'");
    }

    int sock_;
    unsigned index_;
    RecvContext& ctx_;
    bool discard_;
    AlignedBuffer bufs_[2];
    ParentDirCache dirs_;
    Xxh3 xxh_;
    MarkedWait wait_{sock_, ctx_};
    MarkedWait::Plan plan_{}; // of the receive in flight
    wire::DataFrameParser parser_{"data stream " + std::to_string(index_)};
    std::optional<tls::RecordReader> records_; // encrypted: what the socket is read into

    Block block_;
    bool in_block_ = false; // block_ begun and not ended (claimed: FileTable::claim)
    StreamReceipt whole_; // blocks that arrived whole (a reconnect's STREAM_RESUME)
    uint64_t write_pos_ = 0;
    RecvFile* open_file_ = nullptr;
    UniqueFd open_fd_;
    static constexpr uint64_t kNoId = UINT64_MAX;
    uint64_t last_id_ = kNoId; // of the last block begun
    FileTable::Hold& hold_ = ctx_.files.hold(index_);
    std::vector<std::pair<RecvFile*, UniqueFd>> retired_; // to written_ once their writes are reaped
    WritebackWindow written_;
    std::vector<PendingWrite> writes_;
    std::vector<Verdict> done_;
    Completion recv_, recv_timeout_;
    int recv_buf_ = 0;
    Completion slots_[kWriteSlots]; // tag: the write in writes_
    unsigned free_slots_[kWriteSlots];
    // After the buffers, fds and completions its requests use, so it is torn down (cancelling
    // and reaping them) before any of those goes.
    Ring ring_;
};

} // namespace

std::unique_ptr<StreamReceiver> make_recv_write_receiver(int sock, unsigned index, RecvContext& ctx, bool discard,
                                                         const tls::LinkKeys* keys) {
    return std::make_unique<RecvWriteReceiver>(sock, index, ctx, discard, keys);
}

} // namespace sluice
