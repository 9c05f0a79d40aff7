// Send path "zc": a block is read with O_DIRECT READ_FIXED into registered 1 MiB buffers (the
// disk DMAs into them; no page-cache copy), hashed there, and sent with SEND_ZC from the same
// buffers: the NIC reads user memory, so no CPU copy on the sending side. A buffer is reused
// only after its notification CQE says the kernel let go of it.
//
// The frame prefix carries the block's checksum ahead of its data, so a whole block is read
// before its first byte is sent; all the buffers of a block are in flight together
// (reads in parallel, then one linked chain of sends). The pool holds two blocks so that the
// next block's reads need not wait for the previous block's notifications.
//
// Fallbacks, each reported through fallback(): a file system that refuses O_DIRECT (buffered
// READ, one copy), a refused buffer registration (RLIMIT_MEMLOCK without CAP_IPC_LOCK: plain
// READ and unregistered SEND_ZC, which pins pages per send), and sends the kernel copied
// anyway (loopback and veth copy every zero-copy skb on delivery).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "core/io/aligned_buffer.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "send/paths/block_sender.hpp"
#include "core/checksum/xxh3.hpp"
#include "core/wire/codec.hpp"

// Linux 6.2 (headers of liburing 2.3 predate it): ask notifications to say whether the
// kernel had to copy the data after all.
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

namespace sluice {

namespace {

constexpr size_t kBufferBytes = 1 << 20;
constexpr uint64_t kAlign = 4096;
constexpr uint64_t kDirectMinBytes = 1 << 20; // smaller files are read buffered (likely cached)

class ZcSender final : public BlockSender {
    enum class State : uint8_t { free, reading, sending, awaiting_notif };
    struct Buffer {
        AlignedBuffer buf{kBufferBytes};
        State state = State::free;
        size_t want = 0; // bytes of the block in this buffer
        size_t got = 0;  // bytes read so far
        uint64_t file_offset = 0;
        // After buf: destroyed in flight, they cancel and reap before buf goes.
        Completion read;
        Completion send; // reports twice: the send, then its notification
    };

public:
    explicit ZcSender(int sock) : BlockSender(sock), ring_(256) {}
    const char* name() const override { return "zc"; }

    void send(const Segment& seg, bool more, const Segment*) override {
        cur_ = &seg;
        reader_.check_unchanged();
        const int fd = reader_.open(*seg.file);
        if (open_file_ != seg.file) use_file(*seg.file, fd);
        const size_t n = static_cast<size_t>((seg.length + kBufferBytes - 1) / kBufferBytes);
        grow_pool(2 * n);

        // Read every buffer of the block at once, into buffers whose notifications are in.
        block_.clear();
        for (size_t i = 0; i < n; ++i) {
            size_t c = take_free_buffer();
            Buffer& ch = buffers_[c];
            ch.state = State::reading;
            ch.file_offset = seg.file->file_offset(seg.offset) + i * kBufferBytes;
            ch.want = static_cast<size_t>(std::min<uint64_t>(kBufferBytes, seg.length - i * kBufferBytes));
            ch.got = 0;
            block_.push_back(c);
            queue_read(c, fd);
        }
        ring_.submit();
        for (size_t c : block_)
            while (buffers_[c].state == State::reading) handle(ring_.wait());

        xxh_.reset();
        for (size_t c : block_) xxh_.update(buffers_[c].buf.data(), buffers_[c].want);
        wire::BlockPrefix p;
        p.file_id = seg.file->file_id;
        p.offset = seg.offset;
        p.checksum = xxh_.digest();
        wire::encode_block_prefix(prefix_, p, static_cast<uint32_t>(seg.length));

        // One linked chain: prefix, then the buffers in order. Sends on one TCP socket must not
        // overtake each other; the link keeps them in order and a failed step cancels the rest.
        {
            auto chain = ring_.chain(static_cast<unsigned>(block_.size()) + 1);
            ring_.send(prefix_send_, sock_, prefix_, sizeof prefix_, MSG_NOSIGNAL | MSG_MORE | MSG_WAITALL);
            sends_left_ = 1;
            for (size_t i = 0; i < block_.size(); ++i) {
                Buffer& ch = buffers_[block_[i]];
                ch.state = State::sending;
                bool last = i + 1 == block_.size();
                int flags = MSG_NOSIGNAL | MSG_WAITALL | ((more || !last) ? MSG_MORE : 0);
                ring_.send_zc(ch.send, sock_, ch.buf.data(), ch.want, flags, zc_flags_,
                              fixed_ ? static_cast<int>(block_[i]) : -1);
                ++sends_left_;
            }
        }
        ring_.submit();
        // Returns once the data is in the socket (so a later frame cannot overtake it); the
        // buffers stay busy until their notifications arrive. Bounded by the idle timeout
        // (wait_bounded), not by link timeouts: a SEND_ZC cancelled while it waits for room
        // can complete without IORING_CQE_F_MORE and still post a notification, which would
        // name a completion the ring no longer tracks.
        while (sends_left_) wait_bounded();
    }

    std::string fallback() const override {
        std::string out;
        auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
        if (direct_refused_) add("zc: the source refuses O_DIRECT: buffered reads (one copy)");
        if (!register_error_.empty()) add("zc: " + register_error_);
        if (copied_sends_)
            add("zc: the kernel copied " + std::to_string(copied_sends_) + " of " + std::to_string(zc_sends_) +
                " zero-copy sends (loopback and veth always copy)");
        return out;
    }

private:
    void use_file(const SourceFile& f, int fd) {
        open_file_ = &f;
        direct_ = false;
        if (f.size < kDirectMinBytes || direct_refused_ || f.base % 4096) return; // O_DIRECT needs aligned offsets
        int fl = ::fcntl(fd, F_GETFL);
        if (fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
            direct_ = true;
            return;
        }
        if (errno != EINVAL) throw_errno(ErrorCode::source, "cannot open source '" + f.path + "' for direct reads");
        direct_refused_ = true;
    }

    void grow_pool(size_t want) {
        if (buffers_.size() >= want) return;
        drain_notifications(); // re-registration must not pull buffers from under the kernel
        while (buffers_.size() < want) {
            Buffer& ch = buffers_.emplace_back();
            ch.read.tag = ch.send.tag = buffers_.size() - 1;
        }
        if (!register_error_.empty()) return; // refused once: stay unregistered
        std::vector<iovec> iov(buffers_.size());
        for (size_t i = 0; i < buffers_.size(); ++i) iov[i] = {buffers_[i].buf.data(), kBufferBytes};
        int rc = ring_.register_buffers(iov);
        fixed_ = rc == 0;
        if (rc < 0)
            register_error_ = std::string("registering buffers failed (") + std::strerror(-rc) +
                              (rc == -ENOMEM ? ", RLIMIT_MEMLOCK" : "") + "): unregistered buffers, plain reads";
    }

    size_t take_free_buffer() {
        for (;;) {
            for (size_t k = 0; k < buffers_.size(); ++k) {
                size_t c = (next_ + k) % buffers_.size();
                if (buffers_[c].state == State::free) {
                    next_ = c + 1;
                    return c;
                }
            }
            wait_bounded();
        }
    }

    // Waits for a CQE. Reads are our own work and may take what they take; a wait for
    // notifications alone is a wait for the receiver to take the data (TCP acks), bounded by
    // the idle timeout.
    // Sends still waiting for room are ended by shutting the socket down, not by cancelling
    // them: they then fail like any lost connection, with their notifications announced.
    void wait_bounded() {
        for (;;) {
            const uint64_t acked = bytes_acked(sock_);
            if (Completion* c = ring_.wait_for(idle_timeout_ms_)) return handle(*c);
            bool reading = false;
            for (auto& ch : buffers_) reading |= ch.state == State::reading;
            // Our own reads, or a receiver that is slow but still taking data: wait again.
            if (reading || bytes_acked(sock_) != acked) continue;
            ::shutdown(sock_, SHUT_RDWR);
            while (sends_left_) {
                try {
                    handle(ring_.wait());
                } catch (const Error&) {
                    // The shutdown's own consequence; the timeout is what is reported.
                }
            }
            receiver_stopped_reading("data stream lost while sending '" + path_rel(*cur_) + "'");
        }
    }

    void queue_read(size_t c, int fd) {
        Buffer& ch = buffers_[c];
        size_t left = ch.want - ch.got;
        // O_DIRECT needs aligned lengths: a file's tail is read rounded up (the read stops at EOF).
        if (direct_) left = (left + kAlign - 1) / kAlign * kAlign;
        ring_.read(ch.read, fd, ch.buf.data() + ch.got, static_cast<unsigned>(left), ch.file_offset + ch.got,
                   fixed_ ? static_cast<int>(c) : -1);
    }

    void handle(Completion& done) {
        const Segment& seg = *cur_;
        if (&done == &prefix_send_) {
            --sends_left_;
            if (done.outcome() != Completion::Outcome::ok) send_failed(done.error(), seg);
            if (done.result() != static_cast<int>(sizeof prefix_)) short_send(seg);
            return;
        }
        const size_t c = static_cast<size_t>(done.tag);
        Buffer& ch = buffers_[c];
        if (&done == &ch.read) {
            switch (done.outcome()) {
            case Completion::Outcome::ok: break;
            case Completion::Outcome::retry: return requeue_read(c, seg);
            case Completion::Outcome::cancelled:
            case Completion::Outcome::failed:
                throw_errno(ErrorCode::source, "cannot read source '" + path_of(seg) + "'", done.error());
            }
            if (done.result() == 0) shrank(seg, ch);
            ch.got = std::min(ch.want, ch.got + static_cast<size_t>(done.result()));
            if (ch.got < ch.want) return requeue_read(c, seg);
            ch.state = State::sending; // read done; held for the send
            return;
        }
        if (done.flags() & IORING_CQE_F_NOTIF) {
            ++zc_sends_;
            if (done.raw_result() & IORING_NOTIF_USAGE_ZC_COPIED) ++copied_sends_;
            ch.state = State::free;
            return;
        }
        --sends_left_;
        // Without F_MORE no notification follows (the send failed before using the buffer).
        ch.state = done.busy() ? State::awaiting_notif : State::free;
        if (done.outcome() != Completion::Outcome::ok) send_failed(done.error(), seg);
        if (static_cast<size_t>(done.result()) != ch.want) short_send(seg);
    }

    // A short read (a signal, or O_DIRECT stopping early): read the rest, buffered if the
    // remainder is no longer aligned.
    void requeue_read(size_t c, const Segment& seg) {
        Buffer& ch = buffers_[c];
        if (direct_ && ch.got % kAlign) {
            while (ch.got < ch.want) {
                ssize_t r = ::pread(reader_fd_for(seg), ch.buf.data() + ch.got, ch.want - ch.got,
                                    static_cast<off_t>(ch.file_offset + ch.got));
                if (r < 0 && errno == EINTR) continue;
                if (r < 0 && errno == EINVAL)
                    throw Error(ErrorCode::source, "source '" + path_of(seg) + "': unaligned direct read");
                if (r < 0) throw_errno(ErrorCode::source, "cannot read source '" + path_of(seg) + "'");
                if (r == 0) shrank(seg, ch);
                ch.got += static_cast<size_t>(r);
            }
            ch.state = State::sending;
            return;
        }
        queue_read(c, reader_fd_for(seg));
        ring_.submit();
    }

    int reader_fd_for(const Segment& seg) { return reader_.open(*seg.file); }
    // A read found end of file inside the block: the file ends where this buffer's read stopped.
    [[noreturn]] static void shrank(const Segment& seg, const Buffer& ch) {
        if (!seg.file) throw Error(ErrorCode::source, "a source shrank while being sent");
        const uint64_t start = seg.file->file_offset(seg.offset);
        throw_source_shrank(*seg.file, start, seg.length, ch.file_offset + ch.got - start);
    }
    static std::string path_of(const Segment& seg) { return seg.file ? seg.file->path : std::string("?"); }
    static std::string path_rel(const Segment& seg) { return seg.file ? seg.file->rel : std::string("?"); }

    [[noreturn]] void send_failed(int err, const Segment& seg) {
        throw_errno(ErrorCode::network, "data stream lost while sending '" + (seg.file ? seg.file->rel : std::string("?")) + "'",
                    err);
    }
    [[noreturn]] void short_send(const Segment& seg) {
        throw Error(ErrorCode::network,
                    "data stream lost while sending '" + (seg.file ? seg.file->rel : std::string("?")) + "' (short send)");
    }

    void drain_notifications() {
        for (;;) {
            bool busy = false;
            for (auto& ch : buffers_) busy |= ch.state != State::free;
            if (!busy) return;
            wait_bounded();
        }
    }

    // Declared before ring_ so the ring is torn down first (cancelling and reaping the reads
    // and sends); notifications still owed are written off: the kernel keeps the pages of a
    // buffer it still references pinned, so freeing our mapping after is safe.
    std::deque<Buffer> buffers_; // deque: buffers never move once registered
    unsigned char prefix_[32];
    Completion prefix_send_;
    Ring ring_;
    std::vector<size_t> block_;
    Xxh3 xxh_;
    size_t next_ = 0;
    unsigned sends_left_ = 0;
    // Needs Linux 6.2 (the kernel that has SEND_ZC for stream sockets in practice).
    const unsigned zc_flags_ = IORING_SEND_ZC_REPORT_USAGE;
    bool fixed_ = false;
    bool direct_ = false;
    bool direct_refused_ = false;
    std::string register_error_;
    const SourceFile* open_file_ = nullptr;
    const Segment* cur_ = &no_segment_; // the block being sent, for error messages
    static inline const Segment no_segment_{};
    uint64_t zc_sends_ = 0, copied_sends_ = 0;
};

} // namespace

std::unique_ptr<BlockSender> make_zc_sender(int sock) { return std::make_unique<ZcSender>(sock); }

} // namespace sluice
