#pragma once
// The file sender's session (docs/design.md): the calling thread walks the sources and
// streams the manifest on the control connection; a reader thread turns each MANIFEST_ACK
// into planned work; one thread per data stream sends work items through its send path.
// sender.cpp runs it (connecting, the threads, the stats); sender_manifest.cpp walks the
// sources into manifest pages and answers the receiver's frames (acks, RESEND, FILES_DONE,
// ALL_VERIFIED, a dry run's lists). What the pipe sender does alike is in send_core.hpp.
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "send/paths/block_sender.hpp"
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

struct StreamTotals {
    uint64_t blocks = 0;
    uint64_t bytes = 0;
    std::string path_fallback; // BlockSender::fallback()
};

class SendSession final : SendCore {
public:
    SendSession(const std::vector<std::string>& paths, const Endpoint& to, const SendOptions& o);
    SendSession(const std::vector<FdSource>& fds, const Endpoint& to, const SendOptions& o);
    // Before any member goes: the session's threads call into them (SendCore::stop()).
    ~SendSession() override { stop(); }

    Stats run() {
        return fail_on_error([this] { return transfer(); });
    }

private:
    Stats transfer(); // sender.cpp

    // sender_manifest.cpp: the walk into manifest pages, and the receiver's answers.
    void walk_and_announce();
    size_t entries_total() const { return records_.count() + dirs_ + symlinks_; }
    // Streams stay open until the receiver has verified everything: it may still ask for a
    // block again after the last one was planned.
    void wait_for_acks();
    void on_manifest_ack(wire::ManifestAck&& ack) override;
    // The receiver's old version of a file of a page it has not acked yet.
    void on_block_sums(wire::BlockSums&& s) override;
    void on_dry_run_items(std::vector<wire::DryRunItem>&& i) override;
    void on_dry_run_deleted(wire::DryRunDeleted&& d) override;
    void on_files_done(const wire::FilesDone& d) override;
    void on_all_verified() override;
    void on_resend(const wire::ByteRange& r) override;
    // Pages unanswered: the oldest one. Then, once the manifest has ended and no stream has
    // anything to send, ALL_VERIFIED (or a RESEND). While a stream sends, its own sends are
    // bounded (SO_SNDTIMEO, link timeouts); while the walk runs, the receiver owes nothing.
    std::optional<Owed> owed() override;

    // sender.cpp: the data streams.
    void wake_all() override;
    // One data stream: work items until the queue closes (stream_work.hpp).
    std::optional<wire::StreamEnd> send_items(size_t i, StreamProgress* sp);
    // A stream between popping a work item and finishing it: the receiver owes nothing on
    // the control connection while one is (its sends have their own deadlines).
    void stream_busy(bool on);

    SendPath path_ = SendPath::splice;  // the data streams' send path (run())
    std::vector<StreamTotals> totals_;  // totals_[i]: data stream i + 1's, written by its thread
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

} // namespace sluice
