// The sending side of a transfer (docs/design.md): the calling thread walks the sources and
// streams the manifest on the control connection; a reader thread turns each MANIFEST_ACK
// into planned work; one thread per data stream sends work items through its send path.
// What the pipe sender does alike is in send_core.cpp.
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/io/socket.hpp"
#include "core/ring/ring.hpp"
#include "core/wire/codec.hpp"
#include "send/paths/block_sender.hpp"
#include "send/paths/small_file_batch.hpp"
#include "send/plan/fd_sources.hpp"
#include "send/plan/owner_names.hpp"
#include "send/plan/planner.hpp"
#include "send/plan/source_tree.hpp"
#include "send/plan/work_queue.hpp"
#include "send/session/announce_window.hpp"
#include "send/session/dry_run_list.hpp"
#include "send/session/receiver_fit.hpp"
#include "send/session/send_core.hpp"
#include "send/session/source_records.hpp"
#include "send/session/stream_governor.hpp"
#include "send/session/stream_work.hpp"
#include "send/session/update_sums.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

namespace {

struct StreamTotals {
    uint64_t blocks = 0;
    uint64_t bytes = 0;
    std::string path_fallback; // BlockSender::fallback()
};

class SendSession final : SendCore {
public:
    SendSession(const std::vector<std::string>& paths, const Endpoint& to, const SendOptions& o)
        : SendCore(to, o, Mode::files), tree_(tree_options_of(o)), planner_(o.block_size) {
        roots_ = check_sources(paths); // before connecting: a typo costs no connection
    }
    SendSession(const std::vector<FdSource>& fds, const Endpoint& to, const SendOptions& o)
        : SendCore(to, o, Mode::files), planner_(o.block_size) {
        fd_sources_ = check_fd_sources(fds);
    }

    Stats run() {
        auto t0 = Clock::now();
        SendPathChoice choice = choose_send_path(opts_.path, opts_.mptcp);
        log_.verbose_line(std::string("send path: ") + send_path_name(choice.path) +
                          (choice.fallback.empty() ? "" : " (" + choice.fallback + ")"));
        if (choice.path != SendPath::read_send) log_.verbose_line(SmallFileBatch::reads_line());
        connect("", false);
        planner_.set_block_size(block_size());
        fit_.emplace(features_, log_, opts_.progress);
        if (fd_sources_.empty()) fit_->fit_tree(tree_, opts_.delete_extraneous, to_.host + ":" + std::to_string(to_.port));
        window_.set_limit(features_ & wire::kFeatureAnnounceWindow ? opts_.announce_window : 0);
        log_.verbose_line("announce window: " + (window_.limit() ? std::to_string(window_.limit()) + " files" : std::string("off")));
        governor_.emplace(tcp_fds(), opts_.streams_auto, [this](const std::string& l) { log_.verbose_line(l); });
        governor_->start();
        start_pacer([f = governor_->settled_flag()] { return f->load(); }); // or not: SendOptions::pacing
        work_.emplace(StreamWork::Session{
            .queue = queue_, .governor = *governor_, .limiter = limiter_, .log = log_, .opts = opts_, .to = to_, .hello = hello_,
            .busy = [this](bool on) { stream_busy(on); },
            .stopped = [this] { return latch_.stopped(); },
            .cancelled = [this] { return cancelled(); },
            .hold_record = [this](uint64_t id) { return records_.hold(id); }});

        std::vector<std::thread> streams;
        std::vector<StreamTotals> totals(data_.size());
        for (size_t i = 0; i < data_.size(); ++i)
            streams.emplace_back(
                [&, i] { run_stream(i, [&](StreamProgress* sp) { return send_items(i, choice.path, totals[i], sp); }); });
        std::thread reader([&] { read_control(); });

        try {
            walk_and_announce();
            wait_for_acks();
        } catch (const Error& e) {
            latch_.fail(e);
        }
        queue_.close();
        governor_->stop();
        for (auto& t : streams) t.join();
        governor_->join();

        uint64_t blocks = 0, bytes = 0;
        std::vector<std::string> fallbacks;
        if (!choice.fallback.empty()) fallbacks.push_back(choice.fallback);
        fit_->add_fallbacks(fallbacks);
        if (!update_.fallback().empty()) fallbacks.push_back(update_.fallback());
        for (auto& t : totals) {
            blocks += t.blocks;
            bytes += t.bytes;
            if (!t.path_fallback.empty()) fallbacks.push_back(t.path_fallback);
        }
        conclude(reader, blocks, bytes);
        log_.verbose_line(records_.summary());
        log_.verbose_line(work_->read_summary());

        // Known once the streams are open: kTLS may take the records over (connect.cpp).
        const bool records = sealed_records();
        if (records)
            log_.verbose_line(std::string("send path: ") + kRecordsPath + " (encrypted: blocks read into record slots, sealed in place, " +
                              "sent with one sendmsg each; instead of " + send_path_name(choice.path) + ")");
        const bool ring = !records && (choice.path == SendPath::splice || choice.path == SendPath::zc);
        return closing_stats(
            Stats{
                .role = kRole,
                .bytes = total_bytes_,
                .bytes_sent = bytes,
                .bytes_skipped = planner_.skipped_bytes() - update_.reused(),
                .bytes_holes = fit_->holes(),
                .bytes_reused = update_.reused(),
                .bytes_read_direct = work_->bytes_read_direct(),
                .files = records_.count(),
                .dirs = dirs_,
                .symlinks = symlinks_,
                .skipped_entries = skipped_,
                .blocks = blocks,
                .files_held_peak = window_.peak(),
                .checksum_failures = resent_.load(),
                .streams_used = governor_->used(),
                .streams_choice = auto_fixed_.empty() ? governor_->choice() : auto_fixed_,
                .streams_reopened = work_->reopened(),
                .bytes_resent_after_break = work_->resent_after_break(),
                .block_size = block_size(),
                .data_path = records ? kRecordsPath : send_path_name(choice.path),
                .fallbacks = std::move(fallbacks),
                .ring_mode = ring ? probe_ring_features().setup_mode() : "none",
                .dry_run = opts_.dry_run,
                .changes = dry_.take(),
            },
            t0);
    }

private:
    void walk_and_announce() {
        if (features_ & wire::kFeatureUpdate) {
            update_.set_block_size(block_size()); // the size we plan with: what UPDATE_PARAMS names
            wire::Bytes out;
            wire::encode_update_params(out, wire::UpdateParams{.block_size = block_size(), .checksum = opts_.checksum});
            control_.write(out, "sending the update parameters");
        }
        wire::ManifestPage page;
        std::vector<const SourceFile*> page_files; // each held until its page is answered
        size_t page_bytes = 0;
        size_t page_limit = 64; // small first page: data starts flowing after one round trip
        auto flush = [&] {
            if (page.entries.empty()) return;
            page.seq = pages_sent_;
            wire::Bytes out;
            owner_names_.flush(out); // the names of ids this page is the first to use, before it
            wire::encode_manifest(out, page);
            {
                std::lock_guard lk(pages_mu_);
                pending_pages_[page.seq] = std::move(page_files);
                // The receiver answers pages in order: the oldest unanswered one is owed from
                // when it went out, or from the last answer.
                if (pages_acked_ == pages_sent_) page_owed_since_ = Clock::now();
                ++pages_sent_;
            }
            // Before the write: the receiver may answer with FILES_DONE before this thread runs on.
            records_.sent_below(page.entries.back().file_id + 1);
            control_.write(out, "sending the manifest");
            page.entries.clear();
            page.meta.clear();
            page_files.clear();
            page_bytes = 0;
            page_limit = std::min<size_t>(page_limit * 4, kMaxPageEntries); // small pages: the receiver checks one while we walk the next
        };
        if (auto out = fit_->tree_options(tree_, opts_.delete_extraneous, opts_.dry_run, peer_))
            control_.write(*out, "sending the tree options");
        WalkVisitor visit;
        std::optional<wire::EntryMeta> held_meta; // the next entry's (the walk reads it first)
        if (fd_sources_.empty()) visit.tree = &tree_;
        visit.meta = [&](wire::EntryMeta&& m) {
            owner_names_.take(m);
            page_bytes += 24;
            for (const auto& [n, v] : m.xattrs) page_bytes += 6 + n.size() + v.size();
            held_meta = std::move(m); // added with its entry: a full window flushes the page before that
        };
        visit.excluded = [&](std::string_view rel, bool is_dir) {
            ++excluded_;
            log_.verbose_line("excluded by a filter: '" + std::string(rel) + (is_dir ? "/'" : "'"));
        };
        visit.skipped = [&](std::string_view line) {
            ++skipped_;
            log_.line(std::string("warning: ") + std::string(line));
        };
        visit.entry = [&](wire::ManifestEntry&& e, std::string&& src, uint64_t allocated) {
            throw_if_cancelled();
            if (latch_.stopped()) throw Error(ErrorCode::internal, "stopped");
            if (opts_.dry_run) dry_.add(e);
            if (e.kind == wire::EntryKind::file) {
                window_.admit(flush, [&] { return latch_.stopped() || cancelled(); });
                if (fd_sources_.empty()) fit_->describe_holes(e, src, allocated);
                SourceFile sf{e.file_id, e.size, e.mtime_ns, std::move(src), e.path};
                sf.sparse = e.sparse;
                sf.extents = e.data_extents;
                if (!fd_sources_.empty()) attach_fd_source(sf, fd_sources_[e.file_id]);
                const SourceFile& rec = records_.add(std::move(sf));
                rec.hold(); // the page's: let go once the page is answered and planned
                page_files.push_back(&rec);
                total_bytes_ += e.size;
                if (opts_.progress) {
                    opts_.progress->bytes_total += e.size;
                    opts_.progress->files_total += 1;
                }
            } else {
                ++(e.kind == wire::EntryKind::directory ? dirs_ : symlinks_);
            }
            page_bytes += 36 + e.path.size() + e.link_target.size() + 16 * e.data_extents.size();
            if (held_meta) page.meta.emplace_back(page.entries.size(), std::move(*std::exchange(held_meta, std::nullopt)));
            page.entries.push_back(std::move(e));
            if (page.entries.size() >= page_limit || page_bytes >= (1u << 20)) flush();
        };
        if (!fd_sources_.empty()) {
            walk_fd_sources(fd_sources_, visit);
        } else {
            walk_sources(roots_, visit);
        }
        flush();
        if (owner_names_.unnamed()) log_.line("warning: " + std::to_string(owner_names_.unnamed()) + " owner ids sent as numbers alone (over 65536 names of a kind)");
        if (opts_.progress) opts_.progress->walk_done = true;
        wire::Bytes out;
        wire::encode_manifest_end(out, wire::ManifestEnd{.page_count = pages_sent_,
                                                         .file_count = static_cast<uint64_t>(entries_total()),
                                                         .total_bytes = total_bytes_});
        control_.write(out, "sending the manifest");
        std::lock_guard lk(pages_mu_);
        manifest_ended_ = true;
        work_idle_since_ = Clock::now();
    }

    size_t entries_total() const { return records_.count() + dirs_ + symlinks_; }

    // Streams stay open until the receiver has verified everything: it may still ask for a
    // block again after the last one was planned.
    void wait_for_acks() {
        std::unique_lock lk(pages_mu_);
        acks_cv_.wait(lk, [&] { return (pages_acked_ == pages_sent_ && all_verified_) || latch_.stopped(); });
    }

    void on_manifest_ack(wire::ManifestAck&& ack) override {
        std::vector<const SourceFile*> files;
        {
            std::lock_guard lk(pages_mu_);
            auto it = pending_pages_.find(ack.seq);
            if (it == pending_pages_.end())
                throw Error(ErrorCode::protocol, "receiver acknowledged unknown manifest page " + std::to_string(ack.seq));
            files = std::move(it->second);
            pending_pages_.erase(it);
        }
        std::vector<WorkItem> items;
        update_.take_unchanged(files, ack.verified,
                               [&](const wire::Bytes& out) { control_.write(out, "sending the unchanged blocks"); });
        sort_by_file(ack.verified);
        for (const SourceFile* f : files) planner_.add(*f, ack.verified, items);
        count_settled(opts_.progress, files, ack.verified);
        planner_.flush(items);
        if (opts_.dry_run && !items.empty())
            throw Error(ErrorCode::protocol, "receiver asked for data in a dry run (manifest page " + std::to_string(ack.seq) + ")");
        {
            std::lock_guard lk(pages_mu_);
            work_idle_since_ = Clock::now(); // new work: the streams are busy before they pop it
        }
        for (auto& w : items) {
            for (const Segment& seg : w.segments) seg.file->hold(); // let go by the stream that sends it
            queue_.push(std::move(w));
        }
        for (const SourceFile* f : files) f->let_go(); // the page's hold
        {
            std::lock_guard lk(pages_mu_);
            ++pages_acked_;
            page_owed_since_ = Clock::now();
        }
        acks_cv_.notify_all();
    }

    // The receiver's old version of a file of a page it has not acked yet.
    void on_block_sums(wire::BlockSums&& s) override {
        if (!(features_ & wire::kFeatureUpdate)) SendCore::on_block_sums(std::move(s));
        update_.accept(std::move(s), records_.contains(s.file_id));
    }

    void on_dry_run_items(std::vector<wire::DryRunItem>&& i) override { opts_.dry_run ? dry_.on_items(i) : unexpected(0x29); }
    void on_dry_run_deleted(wire::DryRunDeleted&& d) override {
        opts_.dry_run && opts_.delete_extraneous ? dry_.on_deleted(std::move(d)) : unexpected(0x2a);
    }

    void on_files_done(const wire::FilesDone& d) override {
        window_.done(d.files);
        records_.complete_below(d.below);
    }

    void on_all_verified() override {
        std::lock_guard lk(pages_mu_);
        all_verified_ = true;
        acks_cv_.notify_all();
    }

    void on_resend(const wire::ByteRange& r) override {
        const SourceFile* f = &records_.hold_resend(r, opts_.block_size); // the new segment's hold
        ++resent_;
        {
            std::lock_guard lk(pages_mu_);
            work_idle_since_ = Clock::now();
        }
        log_.line("warning: receiver found a checksum mismatch in '" + f->rel + "' at offset " + std::to_string(r.offset) +
                  ": sending it again");
        queue_.push(WorkItem{{Segment{f, r.offset, r.length}}});
    }

    // Pages unanswered: the oldest one. Then, once the manifest has ended and no stream has
    // anything to send, ALL_VERIFIED (or a RESEND). While a stream sends, its own sends are
    // bounded (SO_SNDTIMEO, link timeouts); while the walk runs, the receiver owes nothing.
    std::optional<Owed> owed() override {
        std::lock_guard lk(pages_mu_);
        if (pages_acked_ < pages_sent_)
            return Owed{page_owed_since_, "the acknowledgement of manifest page " + std::to_string(pages_acked_)};
        if (manifest_ended_ && !all_verified_ && busy_streams_ == 0)
            return Owed{work_idle_since_, "the receiver to verify the transfer (ALL_VERIFIED)"};
        if (auto since = window_.waiting_since(); since && busy_streams_ == 0)
            return Owed{std::max(*since, work_idle_since_), "the receiver to report complete files (FILES_DONE)"};
        return std::nullopt;
    }

    void wake_all() override {
        queue_.close();
        window_.stop();
        if (governor_) governor_->stop();
        // Under the lock: wait_for_acks() may have just seen the latch unset and not yet sleep.
        { std::lock_guard lk(pages_mu_); }
        acks_cv_.notify_all();
    }

    // One data stream: work items until the queue closes (stream_work.hpp).
    std::optional<wire::StreamEnd> send_items(size_t i, SendPath path, StreamTotals& t, StreamProgress* sp) {
        return work_->run(i, data_[i].get(), path, t.blocks, t.bytes, t.path_fallback, sp, writer(i));
    }

    // A stream between popping a work item and finishing it: the receiver owes nothing on
    // the control connection while one is (its sends have their own deadlines).
    void stream_busy(bool on) {
        std::lock_guard lk(pages_mu_);
        if (on)
            ++busy_streams_;
        else if (--busy_streams_ == 0)
            work_idle_since_ = Clock::now();
    }

    std::vector<SourceRoot> roots_;
    std::vector<CheckedFdSource> fd_sources_; // send(FdSource) instead of paths
    SourceRecords records_; // work items point into it (each holds its file)
    uint64_t dirs_ = 0, symlinks_ = 0, skipped_ = 0, excluded_ = 0, total_bytes_ = 0;
    UpdateSums update_{opts_.block_size}; // changed-block updates
    std::optional<ReceiverFit> fit_; // what the receiver's hello leaves out (after connecting)
    DryRunList dry_; // --dry-run: what the receiver would change
    OwnerNames owner_names_; // walk thread: each owner's name once, before the page using it

    std::mutex pages_mu_;
    std::condition_variable acks_cv_;
    std::map<uint32_t, std::vector<const SourceFile*>> pending_pages_;
    uint32_t pages_sent_ = 0;
    uint32_t pages_acked_ = 0;
    bool all_verified_ = false;
    bool manifest_ended_ = false;
    unsigned busy_streams_ = 0;
    Clock::time_point page_owed_since_; // the oldest unanswered page is owed since
    Clock::time_point work_idle_since_; // the streams last ran out of work (or got new work)
    std::atomic<uint64_t> resent_{0};
    AnnounceWindow window_; // files announced and not yet complete at the receiver

    std::optional<StreamGovernor> governor_; // which streams take work (--streams auto)
    std::optional<StreamWork> work_;         // what each data stream does
    TreeOptions tree_; // before planner_: initialised first
    Planner planner_; // used by the control reader only
    WorkQueue queue_;
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
