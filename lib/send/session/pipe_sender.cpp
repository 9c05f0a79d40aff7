// Pipe mode, sending side (docs/design.md, "Pipe mode"): the calling thread splices the
// input into piece pipes, piece k going to data stream k mod N (two pipes per stream, so one
// fills while the other drains); each stream thread sends its pieces in order. A reader
// thread watches the control connection for the receiver's verdict or abort. What the file
// sender does alike is in send_core.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/wire/codec.hpp"
#include "send/paths/pipe_piece_sender.hpp"
#include "send/session/producer_watch.hpp"
#include "send/session/send_core.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

namespace {

constexpr uint64_t kPipeId = 0;
constexpr int kSlotsPerStream = 2;
constexpr int kProducerExitWaitMs = 2000;

// One pipe holding one piece between the input and a data stream.
struct Slot {
    explicit Slot() : pipe(static_cast<int>(wire::kMaxPiece)) {}
    Pipe pipe;
    bool full = false;
    uint64_t offset = 0;
    size_t length = 0;
};

class PipeSendSession final : SendCore {
public:
    PipeSendSession(int fd, const Endpoint& to, const SendOptions& o) : SendCore(to, o, Mode::pipe), in_(fd) {
        struct stat st {};
        if (::fstat(fd, &st) != 0) throw_errno(ErrorCode::source, "input fd " + std::to_string(fd));
        int fl = ::fcntl(fd, F_GETFL);
        if (fl < 0 || (fl & O_ACCMODE) == O_WRONLY)
            throw Error(ErrorCode::source, "input fd " + std::to_string(fd) + " is not open for reading");
        if (S_ISDIR(st.st_mode)) throw Error(ErrorCode::source, "input fd " + std::to_string(fd) + " is a directory");
    }
    // Before any member goes: the session's threads call into them (SendCore::stop()).
    ~PipeSendSession() override { stop(); }

    Stats run() {
        return fail_on_error([this] { return transfer(); });
    }

private:
    Stats transfer() {
        auto t0 = Clock::now();
        std::vector<std::string> fallbacks;
        ProducerWatch watch(in_);
        if (!watch.unavailable().empty()) {
            fallbacks.push_back(watch.unavailable());
            log_.verbose_line("warning: " + watch.unavailable());
        } else if (watch.writers()) {
            log_.verbose_line("watching " + std::to_string(watch.writers()) + " producer process(es) for how they exit");
        }
        if (opts_.progress) opts_.progress->is_pipe = true;
        connect(" (pipe mode, splice)", true); // piece k goes to stream k mod N: all must be open
        start_pacer(); // or not: SendOptions::pacing
        announce();

        slots_.resize(data_.size());
        for (auto& s : slots_)
            for (int k = 0; k < kSlotsPerStream; ++k) s.emplace_back();
        // Owned by the session (reader_, streams_): if anything below throws,
        // ~PipeSendSession stops and joins them (SendCore::stop()).
        start_reader();
        totals_.resize(data_.size());
        for (size_t i = 0; i < data_.size(); ++i)
            streams_.start([this, i] { run_stream(i, [this, i](StreamProgress* sp) { return send_pieces(i, sp); }); });

        PieceSource source(in_);
        uint64_t offset = 0;
        std::optional<std::string> truncated;
        try {
            wait_acked();
            offset = pump(source);
            if (!latch_.stopped()) truncated = watch.failure(kProducerExitWaitMs);
        } catch (const Error& e) {
            latch_.fail(e);
        }
        {
            std::lock_guard lk(mu_);
            input_done_ = true;
        }
        cv_.notify_all();
        streams_.join();

        if (truncated && !latch_.stopped()) {
            latch_.fail(Error(ErrorCode::source,
                              *truncated + " after " + std::to_string(offset) + " bytes: the byte stream is truncated"));
            abort_peer(wire::kAbortSourceTruncated);
        }
        uint64_t blocks = 0, bytes = 0;
        for (auto& [b, n] : totals_) {
            blocks += b;
            bytes += n;
        }
        conclude(blocks, bytes);

        if (!source.fallback().empty()) fallbacks.push_back(source.fallback());
        if (!source.small_pipe().empty()) fallbacks.push_back(source.small_pipe());
        return closing_stats(
            Stats{
                .role = kRole,
                .bytes = offset,
                .bytes_sent = offset,
                .blocks = blocks,
                .block_size = wire::kMaxPiece,
                .data_path = source.fallback().empty() ? "pipe_splice" : "pipe_copy",
                .fallbacks = std::move(fallbacks),
                .ring_mode = "none",
            },
            t0);
    }

    void announce() {
        timespec now{};
        ::clock_gettime(CLOCK_REALTIME, &now);
        wire::ManifestPage page;
        page.entries.push_back(wire::ManifestEntry{
            .file_id = kPipeId,
            .mtime_ns = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec,
            .mode = 0644,
            .kind = wire::EntryKind::pipe,
            .path = "stdin",
            .link_target = {},
        });
        wire::Bytes out;
        wire::encode_manifest(out, page);
        wire::encode_manifest_end(out, wire::ManifestEnd{.page_count = 1, .file_count = 1, .total_bytes = 0});
        announced_at_ = Clock::now();
        control_.write(out, "sending the manifest");
    }

    // Only the manifest's acknowledgement: after it, the streams' sends wait for the receiver
    // (each bounded by SO_SNDTIMEO) and the pump waits for the producer, which is not the
    // receiver's to answer for; the verdict after TRANSFER_END is send_core's.
    std::optional<Owed> owed() override {
        std::lock_guard lk(mu_);
        if (!acked_) return Owed{announced_at_, "the acknowledgement of the manifest"};
        return std::nullopt;
    }

    void on_manifest_ack(wire::ManifestAck&& ack) override {
        if (ack.seq != 0 || !ack.verified.empty())
            throw Error(ErrorCode::protocol, "receiver acknowledged a pipe with resume ranges");
        std::lock_guard lk(mu_);
        acked_ = true;
        cv_.notify_all();
    }
    // ALL_VERIFIED: nothing to resend in pipe mode.

    void wake_all() override {
        // Under the lock: a waiter may have just seen the latch unset and not yet sleep.
        { std::lock_guard lk(mu_); }
        cv_.notify_all();
    }

    void wait_acked() {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return acked_ || latch_.stopped(); });
    }

    bool stopping() const { return latch_.stopped() || cancelled(); }

    // Fills slots in data-stream order until end of input; returns the byte stream's length.
    uint64_t pump(PieceSource& source) {
        uint64_t offset = 0;
        // With --rate-limit, pieces small enough that no stream waits for its turn past the
        // limiter's longest wait (rate_limiter.hpp), as the file sender's blocks.
        const size_t most = static_cast<size_t>(limiter_.block_cap(wire::kMaxPiece, data_.size()));
        for (uint64_t k = 0;; ++k) {
            const size_t stream = k % data_.size();
            Slot& slot = slots_[stream][(k / data_.size()) % kSlotsPerStream];
            {
                std::unique_lock lk(mu_);
                cv_.wait(lk, [&] { return !slot.full || latch_.stopped(); });
            }
            throw_if_cancelled();
            if (latch_.stopped()) return offset;
            size_t n = source.fill(slot.pipe, most, [&] { return stopping(); });
            throw_if_cancelled();
            if (n == 0) {
                if (opts_.progress) opts_.progress->walk_done = true; // the byte stream's length is known now
                return offset;
            }
            {
                std::lock_guard lk(mu_);
                slot.full = true;
                slot.offset = offset;
                slot.length = n;
            }
            cv_.notify_all();
            offset += n;
            if (opts_.progress) opts_.progress->bytes_total.store(offset, std::memory_order_relaxed);
        }
    }

    // One data stream: its slots in turn until the input has ended.
    std::optional<wire::StreamEnd> send_pieces(size_t i, StreamProgress* sp) {
        auto& [blocks, bytes] = totals_[i];
        for (uint64_t j = 0;; ++j) {
            Slot& slot = slots_[i][j % kSlotsPerStream];
            {
                std::unique_lock lk(mu_);
                if (sp) sp->state = StreamState::waiting;
                cv_.wait(lk, [&] { return slot.full || input_done_ || latch_.stopped(); });
                if (latch_.stopped()) return std::nullopt;
                if (!slot.full) break; // input ended and this stream's pieces are all sent
            }
            if (sp) sp->state = StreamState::moving;
            if (!limiter_.acquire(slot.length, [this] { return latch_.stopped(); })) return std::nullopt;
            send_piece(data_[i].get(), slot.pipe, kPipeId, slot.offset, slot.length);
            bytes += slot.length;
            ++blocks;
            if (sp) sp->bytes += slot.length;
            if (opts_.progress) opts_.progress->bytes_done.fetch_add(slot.length, std::memory_order_relaxed);
            {
                std::lock_guard lk(mu_);
                slot.full = false;
            }
            cv_.notify_all();
        }
        return wire::StreamEnd{.blocks = blocks, .bytes = bytes};
    }

    int in_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::deque<Slot>> slots_;               // [stream][slot]; deque: Slot holds a Pipe and never moves
    std::vector<std::pair<uint64_t, uint64_t>> totals_; // [stream]: (blocks, bytes) sent
    bool acked_ = false;
    Clock::time_point announced_at_; // set before the reader starts
    bool input_done_ = false;
};

} // namespace

Stats send_pipe(int fd, const Endpoint& to, const SendOptions& options) {
    PipeSendSession session(fd, to, options);
    return session.run();
}

} // namespace sluice
