// Receive path "direct": block data is received straight into page-aligned 2 MiB buffers
// (the one CPU copy, socket -> user), hashed there while hot, and written with O_DIRECT from
// the same memory: no second copy into the page cache. Up to kBuffers writes (WRITE_FIXED)
// are in flight while the next buffer is received. A small file that arrives whole in one block
// goes into an unnamed O_TMPFILE inode (its pages with O_DIRECT too: small_direct_files.hpp),
// linked in place once verified. Other small files, and destinations that refuse O_DIRECT, are
// written at once with pwrite (reported). A block edge inside a 4 KiB page: that part of the
// page goes through the page cache, so it cannot overwrite the neighbour's bytes (direct_layout.hpp).
#include <fcntl.h>
#include <sys/uio.h>

#include <cstring>
#include <deque>
#include <optional>

#include "core/io/sys_error.hpp"
#include "recv/paths/allocate_ahead.hpp"
#include "recv/paths/direct_buffers.hpp"
#include "recv/paths/direct_fallbacks.hpp"
#include "recv/paths/direct_layout.hpp"
#include "recv/paths/small_direct_files.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "recv/paths/stream_socket_reader.hpp"
#include "recv/paths/writeback_window.hpp"
#include "core/checksum/xxh3.hpp"
#include "core/ring/ring.hpp"
#include "core/wire/data_parser.hpp"

namespace sluice {

namespace {

constexpr size_t kBufferBytes = DirectBuffers::kBytes;
constexpr int kBuffers = DirectBuffers::kCount;
constexpr uint64_t kDirectMinBytes = 1 << 20;

class DirectReceiver final : public StreamReceiver {
    // A block whose data has all arrived; verified once its writes are on disk.
    struct PendingBlock {
        RecvFile* file;
        uint64_t offset, length;
        uint64_t checksum;
        bool checksum_ok;
        int writes_left;
        bool received; // all buffers submitted
        int fd;        // the file's fd when it was received
        bool kept;     // that fd is in small_ until the file's last pending block retires
    };

    struct BufferWrite {
        uint64_t offset = 0; // in the file
        size_t at = 0;       // in the buffer
        size_t padded = 0;   // length written: the data rounded up to a page at the end of the file
        int fd = -1;
    };

public:
    DirectReceiver(int sock, unsigned index, RecvContext& ctx, const tls::LinkKeys* keys)
        : sock_(sock), index_(index), ctx_(ctx), dirs_(ctx.tree),
          // Encrypted: records are received into their own buffer and opened into the block buffers.
          socket_(sock, index, ctx, ring_, [this](Completion& c) { handle(c); }, keys, kBufferBytes + 4 * tls::kMaxRecord),
          ring_(64) {
        for (int i = 0; i < kBuffers; ++i) writes_[i].tag = static_cast<uint64_t>(i);
    }

    StreamReceipt run() override {
        auto read = [this](unsigned char* p, size_t n) { socket_.read(p, n); };
        while (auto b = frames_.next(read)) receive_block(b->prefix, b->data_length);
        drain();
        if (socket_.holding()) frames_.data_after_end(); // a record after STREAM_END
        wire::refuse_data_after_end(frames_, sock_);
        return {frames_.counts().blocks, frames_.counts().bytes};
    }

private:
    void receive_block(const wire::BlockPrefix& p, uint64_t len) {
        if (buffers_.due(len)) { // direct_buffers.hpp: no write may read a buffer whose pages are dropped
            drain();
            buffers_.grow(ring_, fb_.register_error);
        }
        // Named before the lookup, so the table never frees it under us (FileTable::Hold); the
        // file open until now stays named until the switch below no longer touches it.
        hold_.look(p.file_id);
        RecvFile& f = file_for_block(ctx_.files, p, len);
        if (open_file_ != &f || small_open_) switch_file(f, p.offset == 0 && len == f.entry.size);
        hold_.settle();
        xxh_.reset();
        pending_.push_back({&f, p.offset, len, p.checksum, false, 0, false, fd_.get(), false});
        const uint64_t end = p.offset + len;
        for (uint64_t pos = p.offset; pos < end;) {
            int c = free_buffer();
            const direct_layout::Chunk chunk = direct_layout::next_chunk(pos, end, kBufferBytes);
            unsigned char* buf = buffers_.data(c);
            unsigned char* data = buf + chunk.skew;
            socket_.read(data, chunk.length, true);
            // Hashed in the memory the writes below take their bytes from.
            xxh_.update(data, chunk.length);
            pos += chunk.length;
            ctx_.bytes_received.fetch_add(chunk.length, std::memory_order_relaxed);
            if (ctx_.progress) ctx_.progress->bytes_done.fetch_add(chunk.length, std::memory_order_relaxed);
            if (small_open_) {
                write_small(f, c, data, chunk.length);
                continue;
            }
            if (!direct_) {
                pwrite_whole(fd_.get(), data, chunk.length, chunk.offset, f.entry.path);
                continue;
            }
            const direct_layout::Plan plan = direct_layout::plan_chunk(chunk, f.entry.size);
            // Pages shared with a neighbouring block: through the page cache, at once.
            if (plan.head.length) write_shared_page(f, buf, plan.head);
            if (plan.tail.length) write_shared_page(f, buf, plan.tail);
            if (!plan.direct.length) continue;
            allocate_ahead(f, fd_.get(), plan.direct.offset, plan.direct.offset + plan.direct.length, allocate_refused_);
            if (plan.direct_padded != plan.direct.length)
                std::memset(buf + plan.direct.at + plan.direct.length, 0, plan.direct_padded - plan.direct.length);
            queue_direct(c, {plan.direct.offset, plan.direct.at, plan.direct_padded, fd_.get()}, plan.direct.length);
        }
        PendingBlock& b = pending_.back();
        b.checksum_ok = xxh_.digest() == p.checksum;
        b.received = true;
        ++whole_.blocks;
        whole_.bytes += len;
        retire_blocks();
    }

public:
    // The writes of blocks that arrived whole finish and they are retired; the block cut
    // short stays unverified (its writes done too, so none lands after the sender's resend).
    std::optional<StreamReceipt> settle_after_break() override {
        try {
            drain();
        } catch (const Error&) {
            return std::nullopt;
        }
        for (const PendingBlock& b : pending_)
            if (b.received) return std::nullopt;
        // The block cut short is the sender's to send again, on any stream: its claim goes
        // before STREAM_RESUME tells the sender so.
        for (const PendingBlock& b : pending_) ctx_.files.disown(*b.file, b.offset, b.length);
        return whole_;
    }

private:
    // A block's part of a page it shares with another block, which another stream may be
    // writing at this moment: a buffered write changes only these bytes (the page cache
    // merges the two parts under its page lock), where an O_DIRECT write of the whole page
    // would put whatever this buffer holds over the neighbour's bytes. The two ways never
    // meet on one page: the O_DIRECT writes cover only pages no other block has bytes in.
    // fsync and fdatasync work on the file, not the fd, so --sync covers these pages too.
    void write_shared_page(const RecvFile& f, const unsigned char* buf, const direct_layout::Run& r) {
        if (!shared_fd_) {
            shared_fd_.reset(::openat(dirs_.get(f.parent), f.temp.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
            if (!shared_fd_) throw_errno(ErrorCode::destination, "cannot open '" + f.entry.path + "' for buffered writes");
        }
        pwrite_whole(shared_fd_.get(), buf + r.at, r.length, r.offset, f.entry.path);
        ++fb_.shared_page_writes;
    }

    // A whole small file in buffer c: its tail through the page cache, its pages with O_DIRECT.
    void write_small(const RecvFile& f, int c, const unsigned char* data, size_t n) {
        const size_t pages = small_.write_tail(f, fd_.get(), data, n);
        if (pages) queue_direct(c, {0, static_cast<size_t>(data - buffers_.data(c)), pages, fd_.get()}, pages);
    }

    void queue_direct(int c, const BufferWrite& w, size_t length) {
        buffer_block_[c] = &pending_.back();
        buffer_len_[c] = length;
        buffer_write_[c] = w;
        queue_write(c);
        ring_.submit();
        pending_.back().writes_left++;
    }

    // Writes in flight use the current fd. An O_DIRECT file's fd is kept by small_ until its last
    // pending block retires, while the stream receives the next file: waiting for the writes at
    // every file stopped the stream for a write's latency per file (the WDT report's small set).
    void switch_file(RecvFile& f, bool whole) {
        if ((small_open_ || direct_) && !pending_.empty() && pending_.back().fd == fd_.get()) {
            for (auto b = pending_.rbegin(); b != pending_.rend() && b->fd == fd_.get(); ++b) b->kept = true;
            small_.keep(std::move(fd_));
        } else {
            drain();
        }
        // Small files written through the page cache go through the window, which bounds the
        // pages this stream leaves cached (writeback_window.hpp); O_DIRECT files left none.
        if (fd_ && open_file_ && !direct_ && !small_open_) written_.add(std::move(fd_), open_file_->entry.size);
        fd_.reset();
        shared_fd_.reset();
        open_file_ = nullptr;
        small_open_ = false;
        direct_ = f.entry.size >= kDirectMinBytes && !fb_.direct_refused;
        // --verify reads the file back by its temporary name, so it keeps one.
        if (whole && !direct_ && !ctx_.verify && !fb_.tmpfile_refused) {
            fd_ = open_unnamed_file(dirs_, f, fb_.tmpfile_refused);
            if (fd_) {
                small_open_ = small_.enabled(); // its pages go with O_DIRECT (small_direct_files.hpp)
                open_file_ = &f;
                return;
            }
        }
        // Written only when set: the streams that share a file of several blocks all come here,
        // and a plain store of the same false by each was a data race (scripts/test-tsan).
        if (f.unnamed) f.unnamed = false;
        int dir = dirs_.get(f.parent);
        int flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
        fd_.reset(::openat(dir, f.temp.c_str(), flags | (direct_ ? O_DIRECT : 0), 0600));
        if (!fd_ && direct_ && errno == EINVAL) {
            fb_.direct_refused = true; // e.g. ramfs: said in the stats as a fallback
            direct_ = false;
            fd_.reset(::openat(dir, f.temp.c_str(), flags, 0600));
        }
        if (!fd_) throw_errno(ErrorCode::destination, "cannot create '" + f.entry.path + "'");
        open_file_ = &f;
    }

    void queue_write(int c) {
        const BufferWrite& w = buffer_write_[c];
        ring_.write(writes_[c], w.fd, buffers_.data(c) + w.at, static_cast<unsigned>(w.padded), w.offset, buffers_.fixed_index(c));
    }

    int free_buffer() {
        for (;;) {
            for (int i = 0; i < kBuffers; ++i)
                if (!writes_[i].busy()) return i;
            handle(ring_.wait());
        }
    }

    void drain() {
        for (;;) {
            bool busy = false;
            for (int i = 0; i < kBuffers; ++i) busy |= writes_[i].busy();
            if (!busy) break;
            handle(ring_.wait());
        }
        retire_blocks();
    }

    // The receive and its timeout keep their results in their completions.
    void handle(Completion& done) {
        if (socket_.owns(done)) return;
        const int c = static_cast<int>(done.tag);
        PendingBlock* b = buffer_block_[c];
        switch (done.outcome()) {
        case Completion::Outcome::ok: break;
        case Completion::Outcome::retry: return queue_write(c);
        case Completion::Outcome::cancelled:
        case Completion::Outcome::failed:
            throw_errno(ErrorCode::destination, "cannot write '" + b->file->entry.path + "'", done.error());
        }
        if (static_cast<size_t>(done.result()) < buffer_len_[c])
            throw Error(ErrorCode::destination, "cannot write '" + b->file->entry.path + "': short write (no space left?)");
        b->writes_left--;
        if (ctx_.bytes_written_direct) ctx_.bytes_written_direct->fetch_add(buffer_len_[c], std::memory_order_relaxed);
        // Verified the moment its data is on disk, not when the sender next sends something:
        // the sender ends its streams only once everything is verified.
        retire_blocks();
    }

    // Blocks retire in order once received and written: the one that completes a file finishes it.
    void retire_blocks() {
        while (!pending_.empty() && pending_.front().received && pending_.front().writes_left == 0) {
            PendingBlock b = pending_.front();
            pending_.pop_front();
            if (!b.checksum_ok) {
                // Asked for only now that the bad data's writes are done, so the resent block,
                // which may come on another stream, cannot be overwritten by them.
                block_failed(ctx_, *b.file, b.offset, b.length);
            } else if (b.kept || b.file == open_file_) {
                block_verified(ctx_, dirs_, *b.file, b.fd, b.offset, b.length, b.checksum);
            } else {
                throw Error(ErrorCode::internal, "a block retired after its file was closed");
            }
            if (b.kept && (pending_.empty() || pending_.front().fd != b.fd)) small_.let_go();
        }
    }

    int sock_;
    unsigned index_;
    RecvContext& ctx_;
    StreamReceipt whole_; // blocks that arrived whole (a reconnect's STREAM_RESUME)
    DirectBuffers buffers_;
    size_t buffer_len_[kBuffers] = {};
    BufferWrite buffer_write_[kBuffers] = {};
    PendingBlock* buffer_block_[kBuffers] = {};
    std::deque<PendingBlock> pending_; // deque: pointers stay valid as blocks are added
    ParentDirCache dirs_;
    Xxh3 xxh_;
    RecvFile* open_file_ = nullptr;
    FileTable::Hold& hold_ = ctx_.files.hold(index_);
    UniqueFd fd_;        // O_DIRECT when direct_
    UniqueFd shared_fd_; // the same file without O_DIRECT, for pages shared with another block
    Completion writes_[kBuffers]; // tag: the buffer
    WritebackWindow written_;
    SmallDirectFiles small_; // fds of small files whose writes are in flight
    bool small_open_ = false; // fd_ is a small file written with O_DIRECT; a resend of it gets a new one
    StreamSocketReader socket_; // its receive and timeout are on ring_
    // After the memory, fds and completions its requests use, so it is torn down (cancelling
    // and reaping them) before any of those goes.
    Ring ring_;
    bool direct_ = false;
    bool allocate_refused_ = false;
    DirectFallbacks fb_;
    wire::DataFrameReader frames_{"data stream " + std::to_string(index_)};

public:
    std::string fallback() const override {
        DirectFallbacks fb = fb_;
        fb.small = small_.fallback();
        return fb.text();
    }
};

} // namespace

std::unique_ptr<StreamReceiver> make_direct_receiver(int sock, unsigned index, RecvContext& ctx, const tls::LinkKeys* keys) {
    return std::make_unique<DirectReceiver>(sock, index, ctx, keys);
}

} // namespace sluice
