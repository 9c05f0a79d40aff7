// Receive path "direct": block data is received straight into page-aligned 2 MiB buffers
// (the one CPU copy, socket -> user), hashed there while hot, and written with O_DIRECT from
// the same memory: the disk's DMA reads it, so there is no second copy into the page cache.
// Up to kBuffers writes (WRITE_FIXED from the registered buffers) are in flight while the next
// buffer is received. Files under kDirectMinBytes, and destinations that refuse O_DIRECT, use buffered writes (reported),
// written at once with pwrite: a buffered write only copies into the page cache, and through
// io_uring it would be handed to an io-wq worker (a context switch per small file). A file
// that arrives whole in one block is written into an unnamed O_TMPFILE inode and linked in
// place once verified: no temporary name to create and rename.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstring>
#include <deque>

#include "core/io/aligned_buffer.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "core/checksum/xxh3.hpp"
#include "core/ring/ring.hpp"
#include "core/wire/data_parser.hpp"

namespace sluice {

namespace {

constexpr size_t kBufferBytes = 2 << 20;
constexpr int kBuffers = 4;
constexpr uint64_t kDirectMinBytes = 1 << 20;
constexpr uint64_t kAlign = 4096;

class DirectReceiver final : public StreamReceiver {
    // A block whose data has all arrived; verified once its writes are on disk.
    struct PendingBlock {
        RecvFile* file;
        uint64_t offset, length;
        uint64_t checksum;
        bool checksum_ok;
        int writes_left;
        bool received; // all buffers submitted
    };

public:
    DirectReceiver(int sock, unsigned index, RecvContext& ctx)
        : sock_(sock), index_(index), ctx_(ctx), buffers_{AlignedBuffer(kBufferBytes), AlignedBuffer(kBufferBytes),
                                                          AlignedBuffer(kBufferBytes), AlignedBuffer(kBufferBytes)},
          dirs_(ctx.tree), ring_(64) {
        for (int i = 0; i < kBuffers; ++i) writes_[i].tag = static_cast<uint64_t>(i);
        timeout_.tv_sec = ctx.idle_timeout_ms / 1000;
        timeout_.tv_nsec = (ctx.idle_timeout_ms % 1000) * 1'000'000LL;
        // Registered once, the buffers are written with WRITE_FIXED: the kernel maps their pages
        // at registration instead of pinning them again for every write.
        iovec iov[kBuffers];
        for (int i = 0; i < kBuffers; ++i) iov[i] = {buffers_[i].data(), kBufferBytes};
        int rc = ring_.register_buffers(iov);
        fixed_ = rc == 0;
        if (rc < 0) register_error_ = std::strerror(-rc);
    }

    StreamReceipt run() override {
        auto read = [this](unsigned char* p, size_t n) { recv_exact(p, n); };
        while (auto b = frames_.next(read)) receive_block(b->prefix, b->data_length);
        drain();
        wire::refuse_data_after_end(frames_, sock_);
        return {frames_.counts().blocks, frames_.counts().bytes};
    }

private:
    void receive_block(const wire::BlockPrefix& p, uint64_t len) {
        RecvFile& f = file_for_block(ctx_.files, p, len);
        if (open_file_ != &f) switch_file(f, p.offset == 0 && len == f.entry.size);
        xxh_.reset();
        pending_.push_back({&f, p.offset, len, p.checksum, false, 0, false});
        for (uint64_t pos = 0; pos < len;) {
            int c = free_buffer();
            size_t n = static_cast<size_t>(std::min<uint64_t>(kBufferBytes, len - pos));
            unsigned char* buf = buffers_[c].data();
            recv_exact(buf, n);
            xxh_.update(buf, n);
            pos += n;
            ctx_.bytes_received.fetch_add(n, std::memory_order_relaxed);
            if (ctx_.progress) ctx_.progress->bytes_done.fetch_add(n, std::memory_order_relaxed);
            if (!direct_) {
                write_now(f, buf, n, p.offset + pos - n);
                continue;
            }
            size_t write_len = n;
            if (direct_ && n % kAlign) {
                // Only a file's last buffer is unaligned: pad it; finish_file truncates.
                write_len = (n + kAlign - 1) / kAlign * kAlign;
                std::memset(buf + n, 0, write_len - n);
            }
            buffer_block_[c] = &pending_.back();
            buffer_len_[c] = n;
            buffer_write_[c] = {p.offset + pos - n, write_len};
            queue_write(c);
            ring_.submit();
            pending_.back().writes_left++;
        }
        PendingBlock& b = pending_.back();
        b.checksum_ok = xxh_.digest() == p.checksum;
        b.received = true;
        retire_blocks();
    }

    void write_now(const RecvFile& f, const unsigned char* p, size_t n, uint64_t offset) {
        while (n) {
            ssize_t w = ::pwrite(fd_.get(), p, n, static_cast<off_t>(offset));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) throw_errno(ErrorCode::destination, "cannot write '" + f.entry.path + "'");
            if (w == 0) throw Error(ErrorCode::destination, "cannot write '" + f.entry.path + "': short write (no space left?)");
            p += w;
            n -= static_cast<size_t>(w);
            offset += static_cast<uint64_t>(w);
        }
    }

    // Writes in flight use the current fd: they must finish before it is closed.
    void switch_file(RecvFile& f, bool whole) {
        drain();
        fd_.reset();
        open_file_ = nullptr;
        direct_ = f.entry.size >= kDirectMinBytes && !direct_refused_;
        // --verify reads the file back by its temporary name, so it keeps one.
        if (whole && !direct_ && !ctx_.verify && !tmpfile_refused_) {
            fd_ = open_unnamed_file(dirs_, f);
            if (fd_) {
                f.unnamed = true;
                open_file_ = &f;
                return;
            }
            if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
                throw_errno(ErrorCode::destination, "cannot create '" + f.entry.path + "'");
            tmpfile_refused_ = true; // the file system has no O_TMPFILE: said in the stats
        }
        f.unnamed = false;
        int dir = dirs_.get(f.parent);
        int flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
        fd_.reset(::openat(dir, f.temp.c_str(), flags | (direct_ ? O_DIRECT : 0), 0600));
        if (!fd_ && direct_ && errno == EINVAL) {
            direct_refused_ = true; // e.g. ramfs: said in the stats as a fallback
            direct_ = false;
            fd_.reset(::openat(dir, f.temp.c_str(), flags, 0600));
        }
        if (!fd_) throw_errno(ErrorCode::destination, "cannot create '" + f.entry.path + "'");
        // Allocated up front, an O_DIRECT file's writes are overwrites of unwritten extents,
        // which ext4 issues inline instead of handing each to an io-wq worker as it does for
        // writes that extend a file (receiver CPU -17% on a 2 GiB file); a full disk also
        // shows here, before the file's data is received. Existing data (a resumed file) is kept.
        if (direct_ && ::fallocate(fd_.get(), 0, 0, static_cast<off_t>(f.entry.size)) != 0 && errno != EOPNOTSUPP)
            throw_errno(ErrorCode::destination, "cannot allocate '" + f.entry.path + "'");
        open_file_ = &f;
    }

    void queue_write(int c) {
        const auto [offset, len] = buffer_write_[c];
        ring_.write(writes_[c], fd_.get(), buffers_[c].data(), static_cast<unsigned>(len), offset, fixed_ ? c : -1);
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
        if (&done == &recv_ || &done == &recv_timeout_) return;
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
                ctx_.block_failed(*b.file, b.offset, b.length);
                continue;
            }
            if (b.file != open_file_) throw Error(ErrorCode::internal, "a block retired after its file was closed");
            block_verified(ctx_, dirs_, *b.file, fd_.get(), b.offset, b.length, b.checksum);
        }
    }

    // Takes what the socket already holds, up to n bytes, with one non-blocking read. Between
    // back-to-back small files the next frame usually is there, and the ring's way (a recv and
    // its linked timeout, two completions, often a sleep and a wakeup) costs far more than one
    // plain system call; when nothing is queued the attempt costs one EAGAIN.
    size_t take_queued(unsigned char* p, size_t n) {
        if (n == 0) return 0; // a zero-length recv returns 0, which means the peer closed
        for (;;) {
            ssize_t r = ::recv(sock_, p, n, MSG_DONTWAIT);
            if (r > 0) return static_cast<size_t>(r);
            if (r == 0) throw stream_cut_short(index_);
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            throw_errno(ErrorCode::network, "data stream " + std::to_string(index_));
        }
    }

    // Receives exactly n bytes, handling write completions while it waits.
    void recv_exact(unsigned char* p, size_t n) {
        size_t got = take_queued(p, n);
        while (got < n) {
            // With a low-water mark the read returns once the mark is met (polled first: an
            // immediate attempt would return the few bytes already there); the loop sets
            // the next mark. Without one, MSG_WAITALL lets the kernel gather the bytes.
            const bool marked = low_water_.expect(n - got);
            {
                auto chain = ring_.chain(2);
                ring_.recv(recv_, sock_, p + got, n - got, marked ? 0 : MSG_WAITALL, marked);
                ring_.link_timeout(recv_timeout_, timeout_);
            }
            ring_.submit();
            while (recv_.busy() || recv_timeout_.busy()) handle(ring_.wait());
            switch (recv_.outcome()) {
            case Completion::Outcome::ok: break;
            case Completion::Outcome::retry: continue;
            case Completion::Outcome::cancelled:
                if (silence_excused(ctx_)) continue; // the sender waits for our answer: wait again
                throw stream_went_silent(index_, ctx_.idle_timeout_ms);
            case Completion::Outcome::failed:
                throw_errno(ErrorCode::network, "data stream " + std::to_string(index_), recv_.error());
            }
            if (recv_.result() == 0) throw stream_cut_short(index_);
            got += static_cast<size_t>(recv_.result());
        }
    }

    int sock_;
    unsigned index_;
    RecvContext& ctx_;
    RecvLowWater low_water_{sock_};
    AlignedBuffer buffers_[kBuffers];
    size_t buffer_len_[kBuffers] = {};
    std::pair<uint64_t, size_t> buffer_write_[kBuffers] = {}; // offset and padded length
    PendingBlock* buffer_block_[kBuffers] = {};
    std::deque<PendingBlock> pending_; // deque: pointers stay valid as blocks are added
    ParentDirCache dirs_;
    Xxh3 xxh_;
    __kernel_timespec timeout_{};
    RecvFile* open_file_ = nullptr;
    UniqueFd fd_;
    Completion writes_[kBuffers]; // tag: the buffer
    Completion recv_, recv_timeout_;
    // After the memory, fds and completions its requests use, so it is torn down (cancelling
    // and reaping them) before any of those goes.
    Ring ring_;
    bool direct_ = false;
    bool direct_refused_ = false;
    bool tmpfile_refused_ = false;
    bool fixed_ = false;
    std::string register_error_;
    wire::DataFrameReader frames_{"data stream " + std::to_string(index_)};

public:
    std::string fallback() const override {
        std::string fb;
        if (direct_refused_) fb = "direct: the destination refuses O_DIRECT (EINVAL): buffered writes";
        if (tmpfile_refused_)
            fb += std::string(fb.empty() ? "" : "; ") +
                  "direct: the destination has no O_TMPFILE: small files under temporary names";
        if (!register_error_.empty())
            fb += (fb.empty() ? "" : "; ") + std::string("direct: registering buffers failed (") + register_error_ +
                  "): writes pin pages each time";
        return fb;
    }
};

} // namespace

std::unique_ptr<StreamReceiver> make_direct_receiver(int sock, unsigned index, RecvContext& ctx) {
    return std::make_unique<DirectReceiver>(sock, index, ctx);
}

} // namespace sluice
