// Stream mode, sending side (docs/design.md, "Stream mode"): the calling thread splices the
// input into chunk pipes, chunk k going to data stream k mod N (two pipes per stream, so one
// fills while the other drains); each stream thread sends its chunks in order. A reader
// thread watches the control connection for the receiver's verdict or abort.
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "core/io/socket.hpp"
#include "send/paths/chunk_sender.hpp"
#include "sluice/sluice.hpp"
#include "core/stats/process_usage.hpp"
#include "send/session/connect.hpp"
#include "core/session/failure_latch.hpp"
#include "core/wire/frame_io.hpp"
#include "send/session/producer_watch.hpp"
#include "send/session/rate_limiter.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

namespace {

constexpr uint64_t kStreamId = 0;
constexpr int kSlotsPerStream = 2;
constexpr int kProducerExitWaitMs = 2000;

// One pipe holding one chunk between the input and a data stream.
struct Slot {
    explicit Slot() : pipe(static_cast<int>(wire::kMaxStreamChunk)) {}
    Pipe pipe;
    bool full = false;
    uint64_t offset = 0;
    size_t length = 0;
};

class StreamSendSession {
public:
    StreamSendSession(int fd, const Endpoint& to, const SendOptions& o)
        : in_(fd), opts_(o), to_(to), peer_(to.host + ":" + std::to_string(to.port)), limiter_(o.rate_limit) {
        if (opts_.streams < 1 || opts_.streams > wire::kMaxStreams)
            throw Error(ErrorCode::usage, "--streams " + std::to_string(opts_.streams) + ": must be 1 to " + std::to_string(wire::kMaxStreams));
        if (to_.token.empty()) throw Error(ErrorCode::usage, "no token: use the receiver's sluice:// line or --token");
        struct stat st{};
        if (::fstat(fd, &st) != 0) throw_errno(ErrorCode::source, "input fd " + std::to_string(fd));
        int fl = ::fcntl(fd, F_GETFL);
        if (fl < 0 || (fl & O_ACCMODE) == O_WRONLY) throw Error(ErrorCode::source, "input fd " + std::to_string(fd) + " is not open for reading");
        if (S_ISDIR(st.st_mode)) throw Error(ErrorCode::source, "input fd " + std::to_string(fd) + " is a directory");
    }

    Stats run() {
        auto t0 = Clock::now();
        ProducerWatch watch(in_);
        if (!watch.unavailable().empty()) {
            fallbacks_.push_back(watch.unavailable());
            log_verbose("warning: " + watch.unavailable());
        } else if (watch.writers()) {
            log_verbose("watching " + std::to_string(watch.writers()) + " producer process(es) for how they exit");
        }
        if (opts_.progress) opts_.progress->is_stream = true;
        Connections c = connect_transfer(to_, opts_);
        control_ = std::move(c.control);
        data_ = std::move(c.data);
        log_verbose("connected to " + peer_ + " with " + std::to_string(data_.size()) + " data streams (stream mode, splice)");
        announce();

        slots_.resize(data_.size());
        for (auto& s : slots_)
            for (int k = 0; k < kSlotsPerStream; ++k) s.emplace_back();
        std::thread reader([&] { control_reader(); });
        std::vector<std::thread> streams;
        std::vector<uint64_t> stream_bytes(data_.size()), stream_blocks(data_.size());
        for (size_t i = 0; i < data_.size(); ++i)
            streams.emplace_back([&, i] { stream_main(i, stream_bytes[i], stream_blocks[i]); });

        ChunkSource source(in_);
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
        for (auto& t : streams) t.join();

        if (truncated && !latch_.stopped()) {
            latch_.fail(Error(ErrorCode::source, *truncated + " after " + std::to_string(offset) + " bytes: the stream is truncated"));
            abort_peer(wire::kAbortSourceTruncated);
            reader.join();
            latch_.rethrow();
        }
        if (latch_.stopped()) {
            latch_.await_peer_reason(std::chrono::milliseconds(1000));
            abort_peer(wire::kAbortFailed);
            reader.join();
            latch_.rethrow();
        }
        finish(stream_blocks, stream_bytes);
        reader.join();
        if (latch_.stopped()) latch_.rethrow();
        if (!final_) throw Error(ErrorCode::network, "receiver " + peer_ + " closed the connection without a final status", ErrorCause::peer_closed);
        if (final_->status != 0) throw Error(ErrorCode::destination, "receiver " + peer_ + " reported failure: " + final_->message, ErrorCause::peer_aborted);

        Stats s;
        s.role = "send";
        s.bytes = s.bytes_sent = offset;
        for (auto b : stream_blocks) s.blocks += b;
        s.seconds = seconds_since(t0);
        s.streams = static_cast<unsigned>(data_.size());
        s.block_size = wire::kMaxStreamChunk;
        s.data_path = source.fallback().empty() ? "stream_splice" : "stream_copy";
        s.fallbacks = fallbacks_;
        if (!source.fallback().empty()) s.fallbacks.push_back(source.fallback());
        s.ring_mode = "none";
        auto u = ProcessUsage::now();
        s.cpu_user_s = u.user_s;
        s.cpu_sys_s = u.sys_s;
        s.peak_rss_kb = static_cast<uint64_t>(u.peak_rss_kb);
        return s;
    }

private:
    void log_verbose(const std::string& line) {
        if (opts_.verbose && opts_.log) opts_.log(line);
    }

    void announce() {
        wire::ManifestChunk chunk;
        wire::ManifestEntry e;
        e.file_id = kStreamId;
        e.kind = wire::EntryKind::stream;
        e.path = "stdin";
        e.mode = 0644;
        timespec now{};
        ::clock_gettime(CLOCK_REALTIME, &now);
        e.mtime_ns = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
        chunk.entries.push_back(std::move(e));
        wire::Bytes out;
        wire::encode_manifest(out, chunk);
        wire::encode_manifest_end(out, {1, 1, 0});
        write_frame(control_.get(), out, "sending the manifest");
    }

    void wait_acked() {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return acked_ || latch_.stopped(); });
    }

    bool stopping() const { return latch_.stopped() || (opts_.cancel && opts_.cancel->load()); }

    // Fills slots in stream order until end of input; returns the stream's length.
    uint64_t pump(ChunkSource& source) {
        uint64_t offset = 0;
        for (uint64_t k = 0;; ++k) {
            const size_t stream = k % data_.size();
            Slot& slot = slots_[stream][(k / data_.size()) % kSlotsPerStream];
            {
                std::unique_lock lk(mu_);
                cv_.wait(lk, [&] { return !slot.full || latch_.stopped(); });
            }
            if (opts_.cancel && opts_.cancel->load()) throw Error(ErrorCode::cancelled, "transfer cancelled");
            if (latch_.stopped()) return offset;
            size_t n = source.fill(slot.pipe, wire::kMaxStreamChunk, [&] { return stopping(); });
            if (opts_.cancel && opts_.cancel->load()) throw Error(ErrorCode::cancelled, "transfer cancelled");
            if (n == 0) {
                if (opts_.progress) opts_.progress->walk_done = true; // the stream's length is known now
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

    void stream_main(size_t i, uint64_t& bytes, uint64_t& blocks) {
        StreamProgress* sp = opts_.progress ? &opts_.progress->streams[i] : nullptr;
        try {
            if (sp) sp->state = StreamState::moving;
            for (uint64_t j = 0;; ++j) {
                Slot& slot = slots_[i][j % kSlotsPerStream];
                {
                    std::unique_lock lk(mu_);
                    if (sp) sp->state = StreamState::waiting;
                    cv_.wait(lk, [&] { return slot.full || input_done_ || latch_.stopped(); });
                    if (latch_.stopped()) return;
                    if (!slot.full) break; // input ended and this stream's chunks are all sent
                }
                if (sp) sp->state = StreamState::moving;
                limiter_.acquire(slot.length);
                send_chunk(data_[i].get(), slot.pipe, kStreamId, slot.offset, slot.length);
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
            wire::Bytes out;
            wire::encode_stream_end(out, {blocks, bytes});
            send_all(data_[i].get(), out, "ending a data stream");
            if (sp) sp->state = StreamState::done;
        } catch (const Error& e) {
            if (sp) sp->state = StreamState::failed;
            latch_.fail(e);
            cv_.notify_all();
        }
    }

    void control_reader() {
        try {
            for (;;) {
                Frame f = read_frame(control_.get(), "control connection");
                switch (f.type()) {
                case wire::FrameType::manifest_ack: {
                    auto ack = wire::decode_manifest_ack(f.payload);
                    if (ack.seq != 0 || !ack.verified.empty())
                        throw Error(ErrorCode::protocol, "receiver acknowledged a stream with resume ranges");
                    std::lock_guard lk(mu_);
                    acked_ = true;
                    cv_.notify_all();
                    break;
                }
                case wire::FrameType::all_verified: break; // nothing to resend in a stream
                case wire::FrameType::final_status: final_ = wire::decode_final_status(f.payload); return;
                case wire::FrameType::abort:
                    latch_.peer_abort(wire::decode_abort(f.payload).message);
                    cv_.notify_all();
                    return;
                default:
                    throw Error(ErrorCode::protocol, std::string("receiver sent an unexpected ") + wire::frame_type_name(f.header.type) +
                                                         " frame in stream mode");
                }
            }
        } catch (const Error& e) {
            if (!latch_.stopped() && !finished_) latch_.fail(e);
            cv_.notify_all();
        }
    }

    void finish(const std::vector<uint64_t>& blocks, const std::vector<uint64_t>& bytes) {
        uint64_t total_blocks = 0, total_bytes = 0;
        for (size_t i = 0; i < data_.size(); ++i) {
            total_blocks += blocks[i];
            total_bytes += bytes[i];
        }
        finished_ = true;
        try {
            send_transfer_end(control_.get(), static_cast<uint32_t>(data_.size()), total_blocks, total_bytes, opts_.idle_timeout_ms);
        } catch (const Error& e) {
            latch_.fail(e);
        }
    }

    void abort_peer(uint32_t code) { abort_transfer(control_.get(), data_, code, latch_.message()); }

    int in_;
    SendOptions opts_;
    Endpoint to_;
    std::string peer_;
    RateLimiter limiter_;
    FailureLatch latch_;
    UniqueFd control_;
    std::vector<UniqueFd> data_;
    std::vector<std::string> fallbacks_;

    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::deque<Slot>> slots_; // [stream][slot]; deque: Slot holds a Pipe and never moves
    bool acked_ = false;
    bool input_done_ = false;
    std::optional<wire::FinalStatus> final_;
    std::atomic<bool> finished_{false};
};

} // namespace

Stats send_stream(int fd, const Endpoint& to, const SendOptions& options) {
    StreamSendSession session(fd, to, options);
    return session.run();
}

} // namespace sluice
