// One data stream of a Receiver without a directory. Frames are read one at a time with
// plain syscalls: a pipe piece is at most 1 MiB and moves with a handful of splices, and a
// sink gets whole verified blocks.
#include "recv/paths/pipe_receiver.hpp"

#include <fcntl.h>
#include <poll.h>

#include <exception>
#include <optional>

#include "core/io/pipe.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/checksum/xxh3.hpp"
#include "core/wire/data_parser.hpp"

namespace sluice {

SinkEntry sink_entry_of(const wire::ManifestEntry& e) {
    SinkEntry s;
    s.id = e.file_id;
    s.path = e.path;
    s.size = e.size;
    s.mode = e.mode;
    s.mtime_ns = e.mtime_ns;
    s.is_pipe = e.kind == wire::EntryKind::pipe;
    return s;
}

namespace {

constexpr const char* kWhat = "data stream";

// The frame loop both paths share: BLOCK frames go to on_block, STREAM_END ends the stream.
class FrameLoop : public StreamReceiver {
public:
    FrameLoop(int sock, unsigned index, RecvContext& ctx) : sock_(sock), index_(index), ctx_(ctx) {
        set_stream_slices(sock, ctx); // recv_patiently's
    }

    StreamReceipt run() override {
        auto read = [this](unsigned char* p, size_t n) { recv_patiently(sock_, {p, n}, index_, ctx_, kWhat); };
        while (auto b = frames_.next(read)) on_block(b->prefix, b->data_length);
        wire::refuse_data_after_end(frames_, sock_);
        return {frames_.counts().blocks, frames_.counts().bytes};
    }

protected:
    virtual void on_block(const wire::BlockPrefix& p, uint32_t length) = 0;

    // The pipe entry a piece names, checked: announced, a pipe, in increasing order.
    void check_piece(const wire::BlockPrefix& p, uint32_t length) {
        RecvFile* f = ctx_.files.find(p.file_id);
        if (!f || f->entry.kind != wire::EntryKind::pipe)
            throw Error(ErrorCode::protocol,
                        "pipe piece for id " + std::to_string(p.file_id) + ", which is not the announced pipe");
        if (length > wire::kMaxPiece)
            throw Error(ErrorCode::protocol, "pipe piece of " + std::to_string(length) + " bytes exceeds the 1 MiB limit");
        if (p.offset < next_offset_ || p.offset > wire::kMaxFileSize)
            throw Error(ErrorCode::protocol, "pipe piece at offset " + std::to_string(p.offset) + " out of order on its stream");
        next_offset_ = p.offset + length;
    }

    void counted(uint32_t length) {
        ctx_.bytes_received.fetch_add(length, std::memory_order_relaxed);
        if (ctx_.progress) ctx_.progress->bytes_done.fetch_add(length, std::memory_order_relaxed);
    }

    int sock_;
    unsigned index_;
    RecvContext& ctx_;
    wire::DataFrameReader frames_{kWhat};
    uint64_t next_offset_ = 0;
};

// Waits for the socket to have data, or fails once the stream and the rest of the transfer
// have been silent for the idle timeout (silence_excused()).
void wait_readable(int sock, unsigned index, const RecvContext& ctx) {
    pollfd p{sock, POLLIN, 0};
    for (;;) {
        int r = ::poll(&p, 1, ctx.idle_timeout_ms > 0 ? ctx.idle_timeout_ms : -1);
        if (r > 0) return;
        if (r < 0 && errno == EINTR) continue;
        if (r == 0 && silence_excused(ctx)) continue;
        if (r == 0) throw stream_went_silent(index, ctx);
        throw_errno(ErrorCode::network, "poll on a data stream");
    }
}

class PipeToFd final : public FrameLoop {
public:
    PipeToFd(int sock, unsigned index, RecvContext& ctx, OrderedOutput& out)
        : FrameLoop(sock, index, ctx), out_(out), pipe_(wire::kMaxPiece) {}
    std::string fallback() const override { return out_.fallback(); }

private:
    void on_block(const wire::BlockPrefix& p, uint32_t length) override {
        check_piece(p, length);
        size_t received = 0, parked = 0;
        bool turn = false;
        while (received < length) {
            wait_readable(sock_, index_, ctx_);
            ssize_t n = ::splice(sock_, nullptr, pipe_.write_fd(), nullptr, length - received, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                received += static_cast<size_t>(n);
                parked += static_cast<size_t>(n);
                credit_arrival(ctx_, static_cast<size_t>(n));
                out_.note_arrival(); // keeps a stream waiting for a later piece's turn patient
                continue;
            }
            if (n == 0)
                throw Error(ErrorCode::network, "data stream: connection closed by peer in the middle of a piece",
                            ErrorCause::peer_closed);
            if (errno == EINTR) continue;
            if (errno != EAGAIN) throw_errno(ErrorCode::network, "data stream");
            // The socket has data but the pipe is full (small skb fragments use up its slots):
            // this piece cannot be parked whole, so it waits for its turn and flows through.
            if (!turn) {
                out_.wait_turn(p.offset, ctx_.idle_timeout_ms);
                turn = true;
            }
            out_.drain_pipe(pipe_.read_fd(), parked);
            parked = 0;
        }
        if (!turn) out_.wait_turn(p.offset, ctx_.idle_timeout_ms);
        out_.drain_pipe(pipe_.read_fd(), parked);
        out_.end_turn(length);
        counted(length);
    }

    OrderedOutput& out_;
    Pipe pipe_;
};

class SinkReceiver final : public FrameLoop {
public:
    SinkReceiver(int sock, unsigned index, RecvContext& ctx, Sink& sink, OrderedOutput& pipe_out)
        : FrameLoop(sock, index, ctx), sink_(sink), pipe_out_(pipe_out) {}

private:
    void on_block(const wire::BlockPrefix& p, uint32_t length) override {
        RecvFile* f = ctx_.files.find(p.file_id);
        if (f && f->entry.kind == wire::EntryKind::pipe) {
            check_piece(p, length);
            auto data = receive(length);
            pipe_out_.note_arrival();
            pipe_out_.wait_turn(p.offset, ctx_.idle_timeout_ms);
            guarded([&] { pipe_out_.write(p.offset, data); });
            pipe_out_.end_turn(length);
            counted(length);
            return;
        }
        RecvFile& file = file_for_block(ctx_.files, p, length);
        auto data = receive(length);
        counted(length);
        if (xxh3_64(data.data(), data.size()) != p.checksum) {
            block_failed(ctx_, file, p.offset, length);
            return;
        }
        SinkEntry e = sink_entry_of(file.entry);
        guarded([&] { sink_.write(e, p.offset, std::as_bytes(data)); });
        if (!ctx_.files.mark_verified(file, p.offset, length, {}, true)) return;
        guarded([&] { sink_.entry_done(e); });
        ctx_.files.set_complete(file);
        ctx_.files_completed.fetch_add(1, std::memory_order_relaxed);
        if (ctx_.progress) ctx_.progress->files_done.fetch_add(1, std::memory_order_relaxed);
        if (ctx_.file_completed) ctx_.file_completed();
    }

    // Grows to the largest block seen (bounded by the frame decoder's 64 MiB).
    std::span<const unsigned char> receive(uint32_t length) {
        if (!buf_ || buf_->size() < length) buf_.emplace((length + 4095) / 4096 * 4096);
        recv_patiently(sock_, std::span(buf_->data(), length), index_, ctx_, kWhat);
        return {buf_->data(), length};
    }

    template <class F> static void guarded(F&& f) {
        try {
            f();
        } catch (const Error&) {
            throw;
        } catch (const std::exception& e) {
            throw Error(ErrorCode::destination, std::string("the sink failed: ") + e.what());
        }
    }

    Sink& sink_;
    OrderedOutput& pipe_out_;
    std::optional<AlignedBuffer> buf_;
};

} // namespace

std::unique_ptr<StreamReceiver> make_pipe_to_fd_receiver(int sock, unsigned index, RecvContext& ctx, OrderedOutput& out) {
    return std::make_unique<PipeToFd>(sock, index, ctx, out);
}

std::unique_ptr<StreamReceiver> make_sink_receiver(int sock, unsigned index, RecvContext& ctx, Sink& sink,
                                                   OrderedOutput& pipe_out) {
    return std::make_unique<SinkReceiver>(sock, index, ctx, sink, pipe_out);
}

} // namespace sluice
