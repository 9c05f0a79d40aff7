// Receive path "recv_write" (and "null"): the socket is read into one of two user buffers
// with IORING_OP_RECV while the blocks parsed from the other buffer are written at their
// offsets with IORING_OP_WRITE, all in one submit. One CPU copy (socket -> user) plus the
// page-cache write; the checksum is computed on the buffer while it is hot.

#include <cstring>
#include <vector>

#include "core/io/aligned_buffer.hpp"
#include "core/io/sys_error.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "core/checksum/xxh3.hpp"
#include "core/ring/ring.hpp"
#include "core/wire/data_parser.hpp"

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
    static constexpr uint64_t kRecvSlot = 0, kTimeoutSlot = 1, kFirstWrite = 2;

public:
    RecvWriteReceiver(int sock, unsigned index, RecvContext& ctx, bool discard)
        : sock_(sock), index_(index), ctx_(ctx), discard_(discard), ring_(256), bufs_{AlignedBuffer(kBufferBytes), AlignedBuffer(kBufferBytes)},
          dirs_(ctx.tree) {
        writes_.reserve(1024);
        done_.reserve(1024);
        timeout_.tv_sec = ctx.idle_timeout_ms / 1000;
        timeout_.tv_nsec = (ctx.idle_timeout_ms % 1000) * 1'000'000LL;
    }

    StreamReceipt run() override {
        int cur = 0;
        queue_recv(cur);
        ring_.submit();
        size_t n = wait_recv();
        for (;;) {
            if (n == 0) {
                if (parser_.ended()) break;
                throw Error(ErrorCode::network, "sender closed data stream " + std::to_string(index_) + " in the middle of the transfer");
            }
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
        wire::refuse_data_after_end(parser_.reader(), sock_);
        return {parser_.counts().blocks, parser_.counts().bytes};
    }

private:
    // --- parser events: build the batch of writes and block verdicts for this buffer ---
    void block_begin(const wire::BlockPrefix& p, uint32_t len) override {
        RecvFile& f = file_for_block(ctx_.files, p, len);
        block_ = {&f, p.offset, len, p.checksum};
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
    }
    void stream_end(const wire::StreamCounts&) override {}

    // --- ring work ---
    void queue_recv(int buf) {
        io_uring_sqe* sqe = ring_.next_sqe();
        io_uring_prep_recv(sqe, sock_, bufs_[buf].data(), kBufferBytes, 0);
        io_uring_sqe_set_data64(sqe, kRecvSlot);
        sqe->flags |= IOSQE_IO_LINK;
        sqe = ring_.next_sqe();
        io_uring_prep_link_timeout(sqe, &timeout_, 0);
        io_uring_sqe_set_data64(sqe, kTimeoutSlot);
    }

    size_t recv_result(int r) {
        if (r == -ECANCELED)
            throw Error(ErrorCode::network, "no data from the sender on stream " + std::to_string(index_) + " for " +
                                                std::to_string(ctx_.idle_timeout_ms / 1000) + " s");
        if (r < 0) throw_errno(ErrorCode::network, "data stream " + std::to_string(index_), -r);
        return static_cast<size_t>(r);
    }

    // Submits this buffer's writes and reaps them; a recv completion seen meanwhile is kept.
    void write_and_reap() {
        for (size_t i = 0; i < writes_.size(); ++i) {
            const PendingWrite& w = writes_[i];
            io_uring_sqe* sqe = ring_.next_sqe();
            io_uring_prep_write(sqe, w.fd, w.data, w.len, w.offset);
            io_uring_sqe_set_data64(sqe, kFirstWrite + i);
        }
        ring_.submit();
        for (size_t left = writes_.size(); left > 0;) {
            auto [slot, res] = ring_.wait_one();
            if (slot >= kFirstWrite) {
                complete_write(writes_[slot - kFirstWrite], res);
                --left;
            } else {
                note_recv_slot(slot, res);
            }
        }
        writes_.clear();
    }

    // Waits until both the recv and its link timeout have completed; returns bytes received.
    size_t wait_recv() {
        while (!recv_seen_ || !timeout_seen_) {
            auto [slot, res] = ring_.wait_one();
            note_recv_slot(slot, res);
        }
        recv_seen_ = timeout_seen_ = false;
        return recv_result(recv_res_);
    }

    void note_recv_slot(uint64_t slot, int res) {
        if (slot == kRecvSlot) {
            recv_seen_ = true;
            recv_res_ = res;
        } else if (slot == kTimeoutSlot) {
            timeout_seen_ = true;
        }
    }

    void complete_write(const PendingWrite& w, int r) {
        if (r < 0) throw_errno(ErrorCode::destination, "cannot write '" + w.file->entry.path + "'", -r);
        // A short write means the next one fails (no space, quota): let pwrite name the error.
        size_t done = static_cast<size_t>(r);
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
                ctx_.block_failed(*b.file, b.offset, b.length);
                continue;
            }
            block_verified(ctx_, dirs_, *b.file, discard_ ? -1 : fd_of(b.file), b.offset, b.length, b.checksum);
        }
        done_.clear();
        retired_.clear();
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
    Ring ring_;
    AlignedBuffer bufs_[2];
    ParentDirCache dirs_;
    Xxh3 xxh_;
    __kernel_timespec timeout_{};
    wire::DataFrameParser parser_{"data stream " + std::to_string(index_)};

    Block block_;
    uint64_t write_pos_ = 0;
    RecvFile* open_file_ = nullptr;
    UniqueFd open_fd_;
    std::vector<std::pair<RecvFile*, UniqueFd>> retired_; // closed once their writes are reaped
    std::vector<PendingWrite> writes_;
    std::vector<Verdict> done_;
    bool recv_seen_ = false, timeout_seen_ = false;
    int recv_res_ = 0;
};

} // namespace

std::unique_ptr<StreamReceiver> make_recv_write_receiver(int sock, unsigned index, RecvContext& ctx, bool discard) {
    return std::make_unique<RecvWriteReceiver>(sock, index, ctx, discard);
}

} // namespace sluice
