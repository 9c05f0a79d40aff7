// The file sender's session (send_session.hpp): connecting, the threads of the data streams
// and the control reader, and the stats. The manifest walk and the receiver's answers are in
// sender_manifest.cpp; what the pipe sender does alike is in send_core.cpp.
#include <mutex>
#include <optional>
#include <thread>

#include "core/ring/ring.hpp"
#include "send/paths/small_file_batch.hpp"
#include "send/session/send_session.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

SendSession::SendSession(const std::vector<std::string>& paths, const Endpoint& to, const SendOptions& o)
    : SendCore(to, o, Mode::files), tree_(tree_options_of(o)), planner_(o.block_size) {
    roots_ = check_sources(paths); // before connecting: a typo costs no connection
}
SendSession::SendSession(const std::vector<FdSource>& fds, const Endpoint& to, const SendOptions& o)
    : SendCore(to, o, Mode::files), planner_(o.block_size) {
    fd_sources_ = check_fd_sources(fds);
}

Stats SendSession::transfer() {
    auto t0 = Clock::now();
    SendPathChoice choice = choose_send_path(opts_.path, opts_.mptcp);
    log_.verbose_line(std::string("send path: ") + send_path_name(choice.path) +
                      (choice.fallback.empty() ? "" : " (" + choice.fallback + ")"));
    if (choice.path != SendPath::read_send) log_.verbose_line(SmallFileBatch::reads_line());
    connect("", false);
    planner_.set_block_size(block_size());
    // On a long path the last blocks go out in pieces (work_queue.hpp, split_tail): as many
    // items as there are streams, in eighths of a block.
    if (path_us_ >= StreamGovernor::kMinRttUs) queue_.split_tail(data_.size(), block_size() / kTailPieces);
    fit_.emplace(features_, log_, opts_.progress);
    if (fd_sources_.empty()) fit_->fit_tree(tree_, opts_.delete_extraneous, to_.host + ":" + std::to_string(to_.port));
    if (push_ && (tree_.hard_links || tree_.specials)) {
        // A serve's receiver refuses both from a pusher (RecvOptions::confine_links): sent as a
        // recv would get them without -H and --specials, rather than failing the push.
        log_.verbose_line("pushing into a sluice serve: hard links sent as copies; fifos, sockets and devices left out "
                          "(the serve makes neither)");
        tree_.hard_links = tree_.specials = false;
    }
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

    // Owned by the session (streams_, reader_), with all they use (totals_, path_): if
    // anything below throws, ~SendSession stops and joins them (SendCore::stop()).
    path_ = choice.path;
    totals_.resize(data_.size());
    queue_.set_takers(data_.size());
    for (size_t i = 0; i < data_.size(); ++i)
        streams_.start([this, i] { run_stream(i, [this, i](StreamProgress* sp) { return send_items(i, sp); }); });
    start_reader();

    try {
        walk_and_announce();
        wait_for_acks();
    } catch (const Error& e) {
        latch_.fail(e);
    }
    queue_.close();
    governor_->stop();
    streams_.join();
    governor_->join();

    uint64_t blocks = 0, bytes = 0;
    std::vector<std::string> fallbacks;
    if (!choice.fallback.empty()) fallbacks.push_back(choice.fallback);
    fit_->add_fallbacks(fallbacks);
    if (!update_.fallback().empty()) fallbacks.push_back(update_.fallback());
    for (auto& t : totals_) {
        blocks += t.blocks;
        bytes += t.bytes;
        if (!t.path_fallback.empty()) fallbacks.push_back(t.path_fallback);
    }
    conclude(blocks, bytes);
    log_.verbose_line(records_.summary());
    log_.verbose_line(work_->read_summary());
    if (unsigned n = work_->ended_at_tail())
        log_.verbose_line(std::to_string(n) + " of " + std::to_string(data_.size()) +
                          " data streams ended before ALL_VERIFIED, with nothing left to carry (the one that carried last "
                          "stays for resends)");
    if (queue_.pieces())
        log_.verbose_line("the end in pieces: " + std::to_string(queue_.pieces()) + " pieces of " +
                          std::to_string((block_size() / kTailPieces) >> 10) +
                          " KiB taken by the free streams from the last blocks (a path of 2 ms or more: a slow stream holds less of the end)");

    // Known once the streams are open: kTLS may take the records over (connect.cpp).
    const bool records = sealed_records();
    if (records)
        log_.verbose_line(std::string("send path: ") + kRecordsPath + " (encrypted: cached blocks read into record slots, cold " +
                          "ones read with O_DIRECT ahead and copied there, sealed in place, sent with one sendmsg each; instead of " + send_path_name(choice.path) + ")");
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

void SendSession::wake_all() {
    queue_.close();
    window_.stop();
    if (governor_) governor_->stop();
    // Under the lock: wait_for_acks() may have just seen the latch unset and not yet sleep.
    { std::lock_guard lk(pages_mu_); }
    acks_cv_.notify_all();
}

std::optional<wire::StreamEnd> SendSession::send_items(size_t i, StreamProgress* sp) {
    StreamTotals& t = totals_[i];
    return work_->run(i, data_[i].get(), path_, t.blocks, t.bytes, t.path_fallback, sp, writer(i));
}

void SendSession::stream_busy(bool on) {
    std::lock_guard lk(pages_mu_);
    if (on)
        ++busy_streams_;
    else if (--busy_streams_ == 0)
        work_idle_since_ = Clock::now();
}

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
