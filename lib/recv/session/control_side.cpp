#include "recv/session/control_side.hpp"

#include <algorithm>

#include "core/io/socket.hpp"
#include "core/wire/link_target.hpp"
#include "recv/paths/pipe_receiver.hpp"
#include "recv/session/finishing.hpp"
#include "recv/session/resume.hpp"
#include "recv/store/sparse_holes.hpp"

namespace sluice {

void ControlSide::serve(uint16_t stream_count) {
    for (;;) {
        await_frame(stream_count);
        // Once a frame has begun, the rest must follow within the idle timeout (SO_RCVTIMEO).
        Frame f = control_.read("control connection");
        pulse_.moved(); // the transfer moves: a data stream with nothing to carry may wait on
        switch (f.type()) {
        case wire::FrameType::manifest:
            pulse_.working(); // the sender waits for the ack before sending this page's data
            on_manifest(wire::decode_manifest(f.payload));
            pulse_.answered();
            break;
        case wire::FrameType::tree_options: on_tree_options(wire::decode_tree_options(f.payload)); break;
        case wire::FrameType::owner_names: on_owner_names(wire::decode_owner_names(f.payload)); break;
        case wire::FrameType::manifest_end: on_manifest_end(wire::decode_manifest_end(f.payload)); break;
        case wire::FrameType::update_params:
            if (pages_ > 0) throw Error(ErrorCode::protocol, "UPDATE_PARAMS after the first manifest page");
            update_.set_params(wire::decode_update_params(f.payload));
            break;
        case wire::FrameType::reuse: on_reuse(wire::decode_reuse(f.payload)); break;
        case wire::FrameType::transfer_end: on_transfer_end(wire::decode_transfer_end(f.payload), stream_count); return;
        case wire::FrameType::abort: {
            wire::Abort a = wire::decode_abort(f.payload);
            if (a.code == wire::kAbortSourceTruncated)
                throw Error(ErrorCode::source, "sender: " + a.message, ErrorCause::peer_aborted);
            throw Error(ErrorCode::network, "sender aborted the transfer: " + a.message, ErrorCause::peer_aborted);
        }
        default:
            throw Error(ErrorCode::protocol, std::string(wire::frame_type_name(f.header.type)) +
                                                 " frame is not allowed from the sender on the control connection");
        }
    }
}

void ControlSide::await_frame(uint16_t stream_count) {
    using Clock = std::chrono::steady_clock;
    const auto idle = std::chrono::milliseconds(opts_.idle_timeout_ms);
    // Until MANIFEST_END the sender must keep talking, on the control connection or with data;
    // after it, data streams have their own timers until they have all ended, and then only
    // TRANSFER_END is owed. Our own work is never counted: the wait starts now, after the
    // last frame was handled (and answered).
    auto quiet_since = Clock::now();
    // Data counts as the sender talking from its first bytes on a socket, not once a block is whole.
    uint64_t bytes_seen = tally_.bytes_received.load(std::memory_order_relaxed) + pulse_.arrivals();
    uint64_t done_seen = tally_.files_completed.load(std::memory_order_relaxed);
    for (;;) {
        std::optional<Clock::time_point> since;
        const char* owed = "the manifest";
        if (!manifest_ended_) {
            since = quiet_since;
        } else if (auto ended = tally_.all_ended_at(stream_count)) {
            since = std::max(*ended, quiet_since);
            owed = "TRANSFER_END (every data stream has ended)";
        }
        const auto now = Clock::now();
        auto wait = idle;
        if (since) {
            if (now >= *since + idle) {
                silence_reported_ = true;
                throw Error(ErrorCode::network,
                            "the sender went silent for " + timeout_text(opts_.idle_timeout_ms) +
                                " on the control connection while the receiver waited for " + owed + " (idle timeout)",
                            ErrorCause::timed_out);
            }
            wait = std::chrono::ceil<std::chrono::milliseconds>(*since + idle - now);
        }
        // Look again at least four times per idle timeout: data arriving meanwhile shows the
        // sender alive, and the streams may all end.
        const auto slice = std::max(idle / 4, std::chrono::milliseconds(100));
        if (wait_readable_for(control_.fd(), static_cast<int>(std::min(wait, slice).count()))) return;
        pulse_.look(); // dates the data streams' movement for each other's idle timers
        uint64_t bytes = tally_.bytes_received.load(std::memory_order_relaxed) + pulse_.arrivals();
        if (bytes != bytes_seen && !manifest_ended_) {
            bytes_seen = bytes;
            quiet_since = Clock::now();
        }
        // With the announce window the sender waits for FILES_DONE while we finish files:
        // finishing them is our work, not its silence.
        uint64_t done = tally_.files_completed.load(std::memory_order_relaxed);
        if (window_ && done != done_seen && !manifest_ended_) {
            done_seen = done;
            quiet_since = Clock::now();
        }
    }
}

Error ControlSide::as_sender_fault(const Error& e) const {
    if (silence_reported_) return e;
    switch (e.cause()) {
    case ErrorCause::peer_closed:
        return Error(ErrorCode::network, "sender disconnected before the transfer was complete", ErrorCause::peer_closed);
    case ErrorCause::timed_out:
        return Error(ErrorCode::network,
                     "the sender went silent for " + timeout_text(opts_.idle_timeout_ms) +
                         " on the control connection (idle timeout)",
                     ErrorCause::timed_out);
    default: return e;
    }
}

void ControlSide::still_working() noexcept {
    using Clock = std::chrono::steady_clock;
    // The sender's idle timeout is its own (it may be shorter than ours): every half second at
    // most, or a quarter of ours if that is shorter. 8 bytes each, only while we work.
    const auto every = std::chrono::duration_cast<Clock::duration>(
        std::min(std::chrono::milliseconds(opts_.idle_timeout_ms) / 4, std::chrono::milliseconds(500)));
    const auto now = Clock::now().time_since_epoch().count();
    auto last = working_sent_.load(std::memory_order_relaxed);
    if (now - last < every.count() || !working_sent_.compare_exchange_strong(last, now)) return;
    try {
        wire::Bytes out;
        wire::encode_working(out);
        send(out);
    } catch (const Error&) {
        // A control connection that cannot take 8 bytes is found broken by the next real
        // frame; a keepalive has nothing to add.
    }
}

void ControlSide::on_manifest(wire::ManifestPage&& page) {
    if (manifest_ended_) throw Error(ErrorCode::protocol, "MANIFEST after MANIFEST_END");
    if (page.seq != pages_) throw Error(ErrorCode::protocol, "manifest page " + std::to_string(page.seq) + " out of order");
    ++pages_;
    if (!(sender_features_ & wire::kFeatureTreeMeta)) refuse_tree_meta(page);
    else if (pages_ == 1 && !tree_meta_.exact() && !page.meta.empty())
        log_.verbose_line("attributes and ACLs the source no longer has are not removed here: the sender does not say its "
                          "lists are complete (an older sluice, or --no-xattrs / --no-acls)");
    wire::ManifestAck ack{.seq = page.seq, .verified = {}};
    size_t next_meta = 0;
    for (size_t i = 0; i < page.entries.size(); ++i) {
        const uint64_t id = page.entries[i].file_id;
        in_place_.reset();
        register_entry(std::move(page.entries[i]), ack.verified);
        const bool has_meta = next_meta < page.meta.size() && page.meta[next_meta].first == i;
        if (has_meta) {
            tree_meta_.confine(files_.at(id).entry.path, page.meta[next_meta].second); // RecvOptions::sender_trust
            tree_meta_.map_acl_ids(files_.at(id).entry.path, page.meta[next_meta].second);
        }
        if (dry_) dry_->add(files_.at(id), has_meta ? &page.meta[next_meta].second : nullptr);
        if (has_meta)
            tree_meta_.add_meta(files_, files_.at(id), std::move(page.meta[next_meta++].second),
                                in_place_ ? &*in_place_ : nullptr, in_place_ ? in_place_dir_ : -1);
        still_working();
    }
    files_.publish();
    if (dry_) send_dry_run_page(); // before the ack: the sender lists a page's items when it is answered
    wire::Bytes out;
    wire::encode_manifest_ack(out, ack);
    send(out);
    report_done(); // files this page completed at once (resumed, empty)
    // A released file's metadata is applied as it goes (TreeMeta::take_released); hard links
    // and special files are never settled, so their slabs stay for the end.
    files_.release_settled([this](std::span<const RecvFile> entries) {
        keep_released(entries);
        if (writes()) tree_meta_.take_released(target_.tree(), entries);
    });
}

void ControlSide::register_entry(wire::ManifestEntry&& e, std::vector<wire::ByteRange>& already) {
    if (opts_.confine_links) wire::check_confined_entry(e);
    // The file table refuses a path listed twice and counts the memory each entry holds.
    target_.check_kind(e);
    // Such an entry would be taken for another's temporary file, and removed as its leftover.
    if (std::string_view(e.path).substr(e.path.rfind('/') + 1).starts_with(wire::kTempNamePrefix))
        throw Error(ErrorCode::protocol, "MANIFEST: '" + e.path + "' has the form of the receiver's temporary names (" +
                                             std::string(wire::kTempNamePrefix) + "*), which no entry may have");
    // A pipe transfer is its one pipe entry.
    if (pipe_entry_ || (e.kind == wire::EntryKind::pipe && files_.size() > 0))
        throw Error(ErrorCode::protocol, "a pipe must be the only entry of its transfer");
    const bool write = writes();
    RecvFile& f = files_.append(std::move(e));
    if (write && f.parent != last_parent_) {
        target_.tree().make_dirs(f.parent);
        last_parent_ = f.parent;
    }
    switch (f.entry.kind) {
    case wire::EntryKind::pipe:
        if (opts_.progress) opts_.progress->is_pipe = true;
        pipe_entry_ = &f;
        target_.pipe_output()->set_entry(sink_entry_of(f.entry));
        break;
    case wire::EntryKind::directory:
        ++counts_.dirs;
        if (write) target_.tree().make_dir_entry(f.entry.path);
        dirs_.push_back(&f.entry);
        files_.settle(f);
        break;
    case wire::EntryKind::symlink:
        ++counts_.links;
        links_.push_back(&f.entry);
        files_.settle(f);
        break;
    case wire::EntryKind::file:
        files_announced_.fetch_add(1);
        register_file(f, already);
        break;
    default: // hard links and special files: made at the end (TreeMeta), from the table
        tree_meta_.add_entry(f);
        break;
    }
}

void ControlSide::register_file(RecvFile& f, std::vector<wire::ByteRange>& already) {
    ++counts_.files;
    counts_.bytes += f.entry.size;
    Progress* p = opts_.progress;
    if (p) {
        p->bytes_total += f.entry.size;
        p->files_total += 1;
    }
    if (dry_) return dry_run_file(f, already);
    if (target_.writes_files()) {
        const int dir = parent_dirs_.get(f.parent);
        Resumed r = resume_file(dir, files_, f, opts_.verify, already, !update_.checksum());
        counts_.bytes_skipped += r.bytes;
        if (p) p->bytes_done += r.bytes;
        if (r.complete) {
            in_place_ = r.in_place;
            in_place_dir_ = dir; // where exact lists are read (a complete file gave its parent back)
            tally_.files_completed.fetch_add(1, std::memory_order_relaxed);
            if (p) p->files_done += 1;
            return;
        }
        if (r.bytes == 0) {
            // Nothing resumed: every block will be received or reused whole, so its sums can be
            // kept (a resumed file's journal blocks may have another size).
            f.keep_sums = !f.entry.sparse && sums_cache_.wants(f.entry.size);
            offer_old_version(f);
        }
    }
    if (f.entry.sparse) {
        Holes h = mark_holes(files_, f);
        counts_.bytes_holes += h.bytes;
        if (p) p->bytes_done += h.bytes;
        if (h.complete) return finish_empty_file(f); // nothing left to send: its size is set there
    }
    if (f.entry.size == 0) finish_empty_file(f);
}

void ControlSide::offer_old_version(RecvFile& f) {
    // --verify reads every block back against the sender's checksum: reused blocks have none,
    // so such a transfer sends files whole.
    if (opts_.verify) return;
    std::optional<wire::BlockSums> s = update_.offer(target_.tree(), f, [this] { still_working(); });
    if (!s) return;
    // Before the page's ack, on the same connection: the sender has the sums when it plans.
    wire::Bytes out;
    wire::encode_block_sums(out, *s);
    send(out);
}

void ControlSide::on_reuse(const wire::Reuse& r) {
    UpdateSide::Applied a = update_.apply(target_.tree(), files_, r, opts_.sync);
    counts_.bytes_reused += a.bytes;
    Progress* p = opts_.progress;
    if (p) p->bytes_done += a.bytes;
    if (!a.complete) return;
    tally_.files_completed.fetch_add(1, std::memory_order_relaxed);
    if (p) p->files_done += 1;
    file_completed();
}

void ControlSide::finish_empty_file(RecvFile& f) {
    target_.empty_file_done(f);
    if (target_.writes_files()) {
        ParentDirCache dirs(target_.tree());
        UniqueFd fd = open_temp_file(dirs, f);
        finish_file(dirs, f, fd.get(), opts_.sync, files_);
    }
    files_.set_complete(f);
    tally_.files_completed.fetch_add(1, std::memory_order_relaxed);
    if (opts_.progress) opts_.progress->files_done += 1;
}

void ControlSide::block_failed(RecvFile& f, uint64_t off, uint64_t len) {
    if (!resends_.may_resend(f.entry.file_id, off))
        throw Error(ErrorCode::integrity, "checksum mismatch in '" + f.entry.path + "' at offset " + std::to_string(off) + " (" +
                                              std::to_string(len) + " bytes), still wrong after " +
                                              std::to_string(ResendPolicy::kMaxResends) + " resends");
    log_.line("warning: checksum mismatch in '" + f.entry.path + "' at offset " + std::to_string(off) +
              ": asking the sender again");
    wire::Bytes out;
    wire::encode_resend(out, wire::ByteRange{.file_id = f.entry.file_id, .offset = off, .length = len});
    send(out);
}

// Once the manifest has ended and every file is complete, the sender may end its streams.
void ControlSide::file_completed() {
    report_done();
    if (tally_.files_completed.load() < files_expected_.load()) return;
    if (all_verified_sent_.exchange(true)) return;
    wire::Bytes out;
    wire::encode_all_verified(out);
    send(out);
}

// FILES_DONE every kReportEvery files, and whenever every file registered so far is complete
// (so a sender waiting with any window, however small, always hears of room).
void ControlSide::report_done() {
    constexpr uint64_t kReportEvery = 256;
    if (!window_) return;
    uint64_t done = 0;
    auto due = [&] {
        done = tally_.files_completed.load();
        const uint64_t last = done_reported_.load();
        return done > last && (done - last >= kReportEvery || done >= files_announced_.load());
    };
    if (!due()) return;
    // One report at a time, in order: the count the sender sees never goes back.
    std::lock_guard lk(done_mu_);
    if (!due()) return;
    done_reported_.store(done);
    wire::Bytes out;
    wire::encode_files_done(out, wire::FilesDone{.files = done, .below = files_.complete_below()});
    send(out);
}

void ControlSide::on_manifest_end(const wire::ManifestEnd& e) {
    if (e.page_count != pages_ || e.file_count != files_.size() || e.total_bytes != counts_.bytes)
        throw Error(ErrorCode::protocol, "MANIFEST_END announces " + std::to_string(e.file_count) + " entries in " +
                                             std::to_string(e.page_count) + " pages, but " + std::to_string(files_.size()) +
                                             " arrived in " + std::to_string(pages_));
    manifest_ended_ = true;
    // From here the control connection is quiet while data flows (the data streams have
    // their own timeouts) until every stream has ended: await_frame().
    if (opts_.progress) opts_.progress->walk_done = true;
    files_expected_ = counts_.files;
    file_completed();
}

void ControlSide::on_transfer_end(const wire::TransferEnd& end, uint16_t stream_count) {
    if (!manifest_ended_) throw Error(ErrorCode::protocol, "TRANSFER_END before MANIFEST_END");
    if (end.data_streams != stream_count) throw Error(ErrorCode::protocol, "TRANSFER_END names a different stream count");
    RecvTally::Ended ended = tally_.await_streams(stream_count, std::chrono::milliseconds(opts_.idle_timeout_ms), latch_);
    if (latch_.stopped()) return;
    if (!ended.all)
        throw Error(ErrorCode::network,
                    "only " + std::to_string(ended.streams) + " of " + std::to_string(stream_count) +
                        " data streams ended within the idle timeout",
                    ErrorCause::timed_out);
    if (ended.blocks != end.blocks || ended.bytes != end.bytes)
        throw Error(ErrorCode::protocol,
                    "sender reports " + std::to_string(end.bytes) + " bytes sent, " + std::to_string(ended.bytes) + " arrived");
    if (pipe_entry_) {
        uint64_t got = target_.pipe_output()->delivered();
        if (got != end.bytes)
            throw Error(ErrorCode::protocol, "the byte stream is incomplete: " + std::to_string(got) + " of " +
                                                 std::to_string(end.bytes) + " bytes arrived");
        target_.pipe_done(got);
    }
    check_files_complete(files_);
    const std::function<void()> working = [this] { still_working(); };
    if (dry_) dry_run_end(working);
    if (writes()) {
        delete_and_link(working);
        apply_dir_metadata(target_.tree(), dirs_, opts_.sync, working);
        tree_meta_.apply(target_.tree(), files_, working);
        tree_meta_.warnings().report(log_);
        // Last: the entries' ctime must be read after every change we make to the files.
        counts_.sums_stored = sums_cache_.flush(target_.tree(), working, sums_note_);
    }
    // A sender this side does not fully trust is told what it did not keep (docs/protocol.md,
    // FINAL_STATUS): it cannot read this side's log, and it should not learn it from a restore.
    std::string message = "complete";
    if (opts_.sender_trust != SenderTrust::full && writes())
        if (std::string w = tree_meta_.warnings().text(wire::kMaxMessageBytes - 16); !w.empty()) message += "\n" + w;
    wire::Bytes out;
    wire::encode_final_status(out, wire::FinalStatus{.files_ok = tally_.files_completed.load(),
                                                     .bytes = tally_.bytes_received.load(),
                                                     .message = message});
    if (!latch_.complete()) return;
    try {
        send(out);
    } catch (const Error&) {
        // The files are complete and in place; a sender gone before reading our verdict does
        // not change that.
    }
}

} // namespace sluice
