// The sending side of a transfer (docs/design.md): the calling thread walks the sources and
// streams the manifest on the control connection; a reader thread turns each MANIFEST_ACK
// into planned work; one thread per data stream sends work items through its send path.
#include <sys/socket.h>

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/io/socket.hpp"
#include "send/paths/block_sender.hpp"
#include "send/paths/small_file_batch.hpp"
#include "send/plan/fd_sources.hpp"
#include "send/plan/planner.hpp"
#include "send/plan/source_tree.hpp"
#include "sluice/sluice.hpp"
#include "core/stats/process_usage.hpp"
#include "core/wire/frame_io.hpp"
#include "send/session/connect.hpp"
#include "core/session/failure_latch.hpp"
#include "send/session/handshake.hpp"
#include "send/session/rate_limiter.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

namespace {

struct StreamTotals {
    uint64_t blocks = 0;
    uint64_t bytes = 0;
    bool read_fallback = false;
    std::string path_fallback; // BlockSender::fallback()
};

class SendSession {
public:
    SendSession(const std::vector<std::string>& paths, const Endpoint& to, const SendOptions& o)
        : opts_(o), to_(to), peer_(to.host + ":" + std::to_string(to.port)), limiter_(o.rate_limit), planner_(o.block_size) {
        check_options();
        roots_ = check_sources(paths); // before connecting: a typo costs no connection
    }
    SendSession(const std::vector<FdSource>& fds, const Endpoint& to, const SendOptions& o)
        : opts_(o), to_(to), peer_(to.host + ":" + std::to_string(to.port)), limiter_(o.rate_limit), planner_(o.block_size) {
        check_options();
        fd_sources_ = check_fd_sources(fds);
    }

    Stats run() {
        auto t0 = Clock::now();
        SendPathChoice choice = choose_send_path(opts_.path);
        log_verbose(std::string("send path: ") + send_path_name(choice.path) +
                    (choice.fallback.empty() ? "" : " (" + choice.fallback + ")"));
        if (choice.path != SendPath::read_send)
            log_verbose("small files (up to " + std::to_string(SmallFileBatch::kMaxFileBytes / 1024) +
                        " KiB, sent whole): read once for the checksum; up to " +
                        std::to_string(SmallFileBatch::kInlineBytes / 1024) + " KiB sent many per send from a buffer, larger with sendfile");
        connect_all();

        std::vector<std::thread> streams;
        std::vector<StreamTotals> totals(data_.size());
        for (size_t i = 0; i < data_.size(); ++i)
            streams.emplace_back([&, i] { stream_main(i, choice.path, totals[i]); });
        std::thread reader([&] { control_reader(); });

        try {
            walk_and_announce();
            wait_for_acks();
        } catch (const Error& e) {
            latch_.fail(e);
        }
        queue_.close();
        for (auto& t : streams) t.join();

        if (latch_.stopped()) {
            latch_.await_peer_reason(std::chrono::milliseconds(1000));
            abort_peer();
            reader.join();
            latch_.rethrow();
        }
        finish(totals);
        reader.join();
        if (latch_.stopped()) latch_.rethrow();
        if (!final_) throw Error(ErrorCode::network, "receiver " + peer_ + " closed the connection without a final status", ErrorCause::peer_closed);
        if (final_->status != 0)
            throw Error(ErrorCode::destination, "receiver " + peer_ + " reported failure: " + final_->message, ErrorCause::peer_aborted);

        Stats s;
        s.role = "send";
        s.bytes = total_bytes_;
        s.bytes_skipped = planner_.skipped_bytes();
        for (auto& t : totals) {
            s.bytes_sent += t.bytes;
            s.blocks += t.blocks;
            if (t.read_fallback) s.fallbacks.push_back("checksums read through a buffer: source could not be mapped");
            if (!t.path_fallback.empty()) s.fallbacks.push_back(t.path_fallback);
        }
        s.files = files_.size();
        s.dirs = dirs_;
        s.symlinks = symlinks_;
        s.skipped_entries = skipped_;
        s.checksum_failures = resent_.load();
        s.seconds = seconds_since(t0);
        s.streams = static_cast<unsigned>(data_.size());
        s.block_size = opts_.block_size;
        s.data_path = send_path_name(choice.path);
        if (!choice.fallback.empty()) s.fallbacks.insert(s.fallbacks.begin(), choice.fallback);
        s.ring_mode = (choice.path == SendPath::splice || choice.path == SendPath::zc) ? probe_ring_features().setup_mode() : "none";
        auto u = ProcessUsage::now();
        s.cpu_user_s = u.user_s;
        s.cpu_sys_s = u.sys_s;
        s.peak_rss_kb = static_cast<uint64_t>(u.peak_rss_kb);
        return s;
    }

private:
    void check_options() {
        if (opts_.streams < 1 || opts_.streams > wire::kMaxStreams)
            throw Error(ErrorCode::usage, "--streams " + std::to_string(opts_.streams) + ": must be 1 to " +
                                              std::to_string(wire::kMaxStreams));
        if (opts_.block_size < 64 * 1024 || opts_.block_size > wire::kMaxBlockData || opts_.block_size % 4096)
            throw Error(ErrorCode::usage, "--block-size " + std::to_string(opts_.block_size) +
                                              ": must be a multiple of 4 KiB from 64 KiB to 64 MiB");
        if (to_.token.empty())
            throw Error(ErrorCode::usage, "no token: use the receiver's sluice:// line or --token");
    }

    void log(std::string_view line) {
        if (!opts_.log) return;
        std::lock_guard lk(log_mu_);
        opts_.log(line);
    }
    void log_verbose(const std::string& line) {
        if (opts_.verbose) log(line);
    }

    void connect_all() {
        Connections c = connect_transfer(to_, opts_);
        control_ = std::move(c.control);
        data_ = std::move(c.data);
        log_verbose("connected to " + peer_ + " with " + std::to_string(opts_.streams) + " data streams");
    }

    void walk_and_announce() {
        wire::ManifestChunk chunk;
        std::vector<const SourceFile*> chunk_files;
        size_t chunk_bytes = 0;
        size_t chunk_limit = 64; // small first chunk: data starts flowing after one round trip
        auto flush = [&] {
            if (chunk.entries.empty()) return;
            chunk.seq = chunks_sent_;
            wire::Bytes out;
            wire::encode_manifest(out, chunk);
            {
                std::lock_guard lk(chunks_mu_);
                pending_chunks_[chunk.seq] = std::move(chunk_files);
                ++chunks_sent_;
            }
            write_frame(control_.get(), out, "sending the manifest");
            chunk.entries.clear();
            chunk_files.clear();
            chunk_bytes = 0;
            chunk_limit = std::min<size_t>(chunk_limit * 4, 4096);
        };
        WalkSink sink;
        sink.skipped = [&](std::string_view line) {
            ++skipped_;
            log(std::string("warning: ") + std::string(line));
        };
        sink.entry = [&](wire::ManifestEntry&& e, std::string&& src) {
            if (opts_.cancel && opts_.cancel->load()) throw Error(ErrorCode::cancelled, "transfer cancelled");
            if (latch_.stopped()) throw Error(ErrorCode::internal, "stopped");
            if (e.kind == wire::EntryKind::file) {
                files_.push_back(SourceFile{e.file_id, e.size, e.mtime_ns, std::move(src), e.path});
                if (!fd_sources_.empty()) attach_fd_source(files_.back(), fd_sources_[e.file_id]);
                chunk_files.push_back(&files_.back());
                {
                    std::lock_guard lk(chunks_mu_);
                    by_id_[e.file_id] = &files_.back();
                }
                total_bytes_ += e.size;
                if (opts_.progress) {
                    opts_.progress->bytes_total += e.size;
                    opts_.progress->files_total += 1;
                }
            } else if (e.kind == wire::EntryKind::directory) {
                ++dirs_;
            } else {
                ++symlinks_;
            }
            chunk_bytes += 36 + e.path.size() + e.link_target.size();
            chunk.entries.push_back(std::move(e));
            if (chunk.entries.size() >= chunk_limit || chunk_bytes >= (1u << 20)) flush();
        };
        if (!fd_sources_.empty()) {
            walk_fd_sources(fd_sources_, sink);
        } else {
            walk_sources(roots_, sink);
        }
        flush();
        if (opts_.progress) opts_.progress->walk_done = true;
        wire::Bytes out;
        wire::encode_manifest_end(out, {chunks_sent_, static_cast<uint64_t>(entries_total()), total_bytes_});
        write_frame(control_.get(), out, "sending the manifest");
    }

    size_t entries_total() const { return files_.size() + dirs_ + symlinks_; }

    // Streams stay open until the receiver has verified everything: it may still ask for a
    // block again after the last one was planned.
    void wait_for_acks() {
        std::unique_lock lk(chunks_mu_);
        acks_cv_.wait(lk, [&] { return (chunks_acked_ == chunks_sent_ && all_verified_) || latch_.stopped(); });
    }

    void control_reader() {
        try {
            for (;;) {
                Frame f = read_frame(control_.get(), "control connection");
                switch (f.type()) {
                case wire::FrameType::manifest_ack: on_ack(wire::decode_manifest_ack(f.payload)); break;
                case wire::FrameType::resend: on_resend(wire::decode_resend(f.payload)); break;
                case wire::FrameType::all_verified: {
                    std::lock_guard lk(chunks_mu_);
                    all_verified_ = true;
                    acks_cv_.notify_all();
                    break;
                }
                case wire::FrameType::final_status: final_ = wire::decode_final_status(f.payload); return;
                case wire::FrameType::abort: {
                    auto a = wire::decode_abort(f.payload);
                    latch_.peer_abort(a.message);
                    wake_all();
                    return;
                }
                default:
                    throw Error(ErrorCode::protocol, std::string("receiver sent an unexpected ") +
                                                         wire::frame_type_name(f.header.type) + " frame");
                }
            }
        } catch (const Error& e) {
            if (!latch_.stopped() && !finished_) latch_.fail(e);
            wake_all();
        }
    }

    void on_ack(const wire::ManifestAck& ack) {
        std::vector<const SourceFile*> files;
        {
            std::lock_guard lk(chunks_mu_);
            auto it = pending_chunks_.find(ack.seq);
            if (it == pending_chunks_.end())
                throw Error(ErrorCode::protocol, "receiver acknowledged unknown manifest chunk " + std::to_string(ack.seq));
            files = std::move(it->second);
            pending_chunks_.erase(it);
        }
        std::vector<WorkItem> items;
        for (const SourceFile* f : files) planner_.add(*f, ack.verified, items);
        count_settled(files, ack.verified);
        planner_.flush(items);
        for (auto& w : items) queue_.push(std::move(w));
        {
            std::lock_guard lk(chunks_mu_);
            ++chunks_acked_;
        }
        acks_cv_.notify_all();
    }

    // Progress for what needs no block: empty files, and ranges the receiver already has
    // (a resume); the stream threads count everything else as it is sent.
    void count_settled(const std::vector<const SourceFile*>& files, const std::vector<wire::ByteRange>& verified) {
        if (!opts_.progress) return;
        std::unordered_map<uint64_t, uint64_t> have;
        for (const auto& r : verified) have[r.file_id] += r.length;
        for (const SourceFile* f : files) {
            auto it = have.find(f->file_id);
            uint64_t skipped = it == have.end() ? 0 : std::min(it->second, f->size);
            opts_.progress->bytes_done += skipped;
            if (skipped == f->size) opts_.progress->files_done += 1;
        }
    }

    void on_resend(const wire::ByteRange& r) {
        const SourceFile* f = nullptr;
        {
            std::lock_guard lk(chunks_mu_);
            auto it = by_id_.find(r.file_id);
            if (it != by_id_.end()) f = it->second;
        }
        if (!f || r.offset > f->size || r.length > f->size - r.offset || r.length == 0 || r.length > opts_.block_size)
            throw Error(ErrorCode::protocol, "receiver asked to resend a block that was never sent (file id " + std::to_string(r.file_id) + ")");
        ++resent_;
        log("warning: receiver found a checksum mismatch in '" + f->rel + "' at offset " + std::to_string(r.offset) + ": sending it again");
        queue_.push(WorkItem{{Segment{f, r.offset, r.length}}});
    }

    void wake_all() {
        queue_.close();
        acks_cv_.notify_all();
    }

    void stream_main(size_t i, SendPath path, StreamTotals& t) {
        StreamProgress* sp = opts_.progress ? &opts_.progress->streams[i] : nullptr;
        try {
            if (sp) sp->state = StreamState::moving;
            int sock = data_[i].get();
            auto sender = make_block_sender(path, sock);
            // Small whole files go through a read buffer (paths/small_file_batch.hpp), except on
            // read_send, the baseline that stays as it is.
            std::optional<SmallFileBatch> batch;
            if (path != SendPath::read_send) batch.emplace(sock, sender->reader());
            while (auto item = queue_.pop()) {
                if (latch_.stopped()) return;
                if (opts_.cancel && opts_.cancel->load()) throw Error(ErrorCode::cancelled, "transfer cancelled");
                for (size_t k = 0; k < item->segments.size(); ++k) {
                    const Segment& seg = item->segments[k];
                    const bool more = k + 1 < item->segments.size();
                    limiter_.acquire(seg.length);
                    if (batch && SmallFileBatch::fits(seg)) {
                        batch->add(seg);
                        if (!more) batch->flush(false);
                    } else {
                        if (batch) batch->flush(true);
                        sender->send(seg, more);
                    }
                    ++t.blocks;
                    t.bytes += seg.length;
                    if (opts_.progress) {
                        sp->bytes += seg.length;
                        opts_.progress->bytes_done += seg.length;
                        if (seg.offset + seg.length == seg.file->size) opts_.progress->files_done += 1;
                    }
                }
            }
            sender->reader().check_unchanged();
            t.read_fallback = sender->reader().used_read_fallback();
            t.path_fallback = sender->fallback();
            wire::Bytes out;
            wire::encode_stream_end(out, {t.blocks, t.bytes});
            send_all(sock, out, "ending a data stream");
            if (sp) sp->state = StreamState::done;
        } catch (const Error& e) {
            if (sp) sp->state = StreamState::failed;
            latch_.fail(e);
            wake_all();
        }
    }

    void finish(const std::vector<StreamTotals>& totals) {
        uint64_t blocks = 0, bytes = 0;
        for (auto& t : totals) {
            blocks += t.blocks;
            bytes += t.bytes;
        }
        finished_ = true;
        try {
            send_transfer_end(control_.get(), static_cast<uint32_t>(data_.size()), blocks, bytes, opts_.idle_timeout_ms);
        } catch (const Error& e) {
            latch_.fail(e);
        }
    }

    void abort_peer() { abort_transfer(control_.get(), data_, wire::kAbortFailed, latch_.message()); }

    SendOptions opts_;
    Endpoint to_;
    std::string peer_;
    std::vector<SourceRoot> roots_;
    std::vector<CheckedFdSource> fd_sources_; // send(FdSource) instead of paths
    UniqueFd control_;
    std::vector<UniqueFd> data_;
    RateLimiter limiter_;
    FailureLatch latch_;
    std::mutex log_mu_;

    std::deque<SourceFile> files_; // stable addresses: work items point into it
    uint64_t dirs_ = 0, symlinks_ = 0, skipped_ = 0, total_bytes_ = 0;

    std::mutex chunks_mu_;
    std::condition_variable acks_cv_;
    std::map<uint32_t, std::vector<const SourceFile*>> pending_chunks_;
    uint32_t chunks_sent_ = 0;
    uint32_t chunks_acked_ = 0;
    bool all_verified_ = false;
    std::unordered_map<uint64_t, const SourceFile*> by_id_;
    std::atomic<uint64_t> resent_{0};

    Planner planner_; // used by the control reader only
    WorkQueue queue_;
    std::optional<wire::FinalStatus> final_;
    std::atomic<bool> finished_{false};
};

} // namespace

Stats send(const std::vector<std::string>& paths, const Endpoint& to, const SendOptions& options) {
    SendSession session(paths, to, options);
    return session.run();
}

Stats send(const std::vector<FdSource>& files, const Endpoint& to, const SendOptions& options) {
    if (files.empty()) throw Error(ErrorCode::usage, "no file descriptors to send");
    SendSession session(files, to, options);
    return session.run();
}

} // namespace sluice
