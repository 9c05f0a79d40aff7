// The file sender's manifest (send_session.hpp): the walk of the sources into manifest pages
// on the control connection, and the receiver's answers that turn into work for the data
// streams (MANIFEST_ACK, RESEND) or end the waits (FILES_DONE, ALL_VERIFIED).
#include <mutex>

#include "core/wire/codec.hpp"
#include "send/session/send_session.hpp"

namespace sluice {

void SendSession::walk_and_announce() {
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
    bool planned_all = false;
    {
        std::lock_guard lk(pages_mu_);
        manifest_ended_ = true;
        work_idle_since_ = Clock::now();
        planned_all = pages_acked_ == pages_sent_;
    }
    if (planned_all) queue_.planned_all(); // the tail: a stream with nothing to carry may end; the end in pieces may begin
}

void SendSession::wait_for_acks() {
    std::unique_lock lk(pages_mu_);
    acks_cv_.wait(lk, [&] { return (pages_acked_ == pages_sent_ && all_verified_) || latch_.stopped(); });
}

void SendSession::on_manifest_ack(wire::ManifestAck&& ack) {
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
    bool planned_all = false;
    {
        std::lock_guard lk(pages_mu_);
        ++pages_acked_;
        page_owed_since_ = Clock::now();
        planned_all = manifest_ended_ && pages_acked_ == pages_sent_;
    }
    // The last page's work is queued: the tail (plan/work_queue.hpp).
    if (planned_all) queue_.planned_all();
    acks_cv_.notify_all();
}

void SendSession::on_block_sums(wire::BlockSums&& s) {
    if (!(features_ & wire::kFeatureUpdate)) SendCore::on_block_sums(std::move(s));
    update_.accept(std::move(s), records_.contains(s.file_id));
}

void SendSession::on_dry_run_items(std::vector<wire::DryRunItem>&& i) { opts_.dry_run ? dry_.on_items(i) : unexpected(0x29); }
void SendSession::on_dry_run_deleted(wire::DryRunDeleted&& d) {
    opts_.dry_run && opts_.delete_extraneous ? dry_.on_deleted(std::move(d)) : unexpected(0x2a);
}

void SendSession::on_files_done(const wire::FilesDone& d) {
    window_.done(d.files);
    records_.complete_below(d.below);
}

void SendSession::on_all_verified() {
    std::lock_guard lk(pages_mu_);
    all_verified_ = true;
    acks_cv_.notify_all();
}

void SendSession::on_resend(const wire::ByteRange& r) {
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

std::optional<SendSession::Owed> SendSession::owed() {
    std::lock_guard lk(pages_mu_);
    if (pages_acked_ < pages_sent_)
        return Owed{page_owed_since_, "the acknowledgement of manifest page " + std::to_string(pages_acked_)};
    if (manifest_ended_ && !all_verified_ && busy_streams_ == 0)
        return Owed{work_idle_since_, "the receiver to verify the transfer (ALL_VERIFIED)"};
    if (auto since = window_.waiting_since(); since && busy_streams_ == 0)
        return Owed{std::max(*since, work_idle_since_), "the receiver to report complete files (FILES_DONE)"};
    return std::nullopt;
}

} // namespace sluice
