#pragma once
// The receiver's control thread (docs/design.md, "Receiver"): reads the sender's frames,
// registers each manifest page in the file table (resuming what an earlier run left) and
// acks it, asks again for blocks that failed their checksum, tells the sender once every file
// is verified, and at TRANSFER_END checks the transfer and sends the verdict.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/session/control_channel.hpp"
#include "core/session/failure_latch.hpp"
#include "core/session/session_log.hpp"
#include "recv/paths/transfer_pulse.hpp"
#include "recv/session/recv_tally.hpp"
#include "recv/session/recv_target.hpp"
#include "recv/session/resend_policy.hpp"
#include "recv/session/update_side.hpp"
#include "recv/store/dry_run_items.hpp"
#include "recv/store/file_table.hpp"
#include "recv/store/tree_meta.hpp"
#include "recv/store/tree_mirror.hpp"

namespace sluice {

class ControlSide {
public:
    struct Counts {
        uint64_t files = 0, dirs = 0, links = 0;
        uint64_t bytes = 0;         // of regular files
        uint64_t bytes_skipped = 0; // verified by an earlier run
        uint64_t bytes_holes = 0;   // holes of sparse files (never sent)
        uint64_t bytes_reused = 0;  // copied from the old version of an updated file
        uint64_t sums_stored = 0;   // files whose block sums went into the cache
    };

    ControlSide(const RecvOptions& opts, RecvTarget& target, FileTable& files, RecvTally& tally, ControlChannel& control,
                SessionLog& log, FailureLatch& latch)
        : opts_(opts), target_(target), files_(files), tally_(tally), control_(control), log_(log), latch_(latch),
          sums_cache_(opts.sums_cache), update_(sums_cache_) {}

    // The sender's ClientHello features: without kFeatureTreeMeta, entry kinds 5-9, metadata
    // trailers and TREE_OPTIONS are refused as a protocol error (it announced none of them).
    void set_sender_features(uint8_t features) { sender_features_ = features; }

    // Serves the control connection until the verdict has been sent (or, after a failure,
    // not); throws what went wrong.
    void serve(uint16_t stream_count);
    // What to fail the transfer with for an error serve() threw: a control connection that
    // closes or goes silent before the end is the sender's doing.
    Error as_sender_fault(const Error& e) const;

    // When the transfer last moved, for the data streams' idle timers (RecvContext).
    TransferPulse& pulse() { return pulse_; }

    // The sender keeps an announce window (ClientHello bit 7): we report complete files
    // (FILES_DONE). Before serve().
    void use_announce_window() { window_ = true; }

    // From the data streams (RecvContext):
    void block_failed(RecvFile& f, uint64_t offset, uint64_t length);
    void file_completed();
    // Called from any thread, often, during our own work the sender waits for (registering a
    // page, --sync's fsyncs, --verify's read-back, the end's symlinks and directories): sends
    // WORKING once half a second (or a quarter of our idle timeout) has passed since we last
    // sent the sender anything, so its deadline measures our silence, never our work. Cheap when nothing is due (a clock read and an atomic load).
    void still_working() noexcept;

    // Once serve() has returned:
    const Counts& counts() const { return counts_; }
    const TreeMeta& tree_meta() const { return tree_meta_; }
    const std::vector<std::string>& deleted() const { return deleted_; }
    bool has_pipe() const { return pipe_entry_ != nullptr; }
    uint64_t checksum_failures() const { return resends_.failures(); }

    const std::string& update_fallback() const { return update_.fallback(); }
    // The block-sums cache (sums_cache.hpp): the data streams leave complete files' sums in it.
    SumsCache& sums_cache() { return sums_cache_; }
    const std::string& sums_cache_note() const { return sums_note_; }
    uint64_t sums_cached() const { return update_.sums_cached(); }
    uint64_t sums_hashed() const { return update_.sums_hashed(); }

private:
    void on_manifest(wire::ManifestPage&& page);
    // TREE_OPTIONS and --dry-run (control_tree.cpp).
    void on_tree_options(wire::TreeOptionsFrame&& t);
    void on_owner_names(const std::vector<wire::OwnerName>& names);
    void dry_run_file(RecvFile& f, std::vector<wire::ByteRange>& already);
    void send_dry_run_page();
    void dry_run_end(const std::function<void()>& working);
    // --delete's sweep, then the hard links, special files and symlinks (each of which a
    // directory in its way gives way to under --delete), the removed paths into deleted_.
    void delete_and_link(const std::function<void()>& working);
    // Whether entries are written to DIR (not a Sink or an fd, not a dry run).
    bool writes() const { return target_.writes_files() && !dry_; }
    void refuse_tree_meta(const wire::ManifestPage& page) const;
    // Changed-block updates (update_side.hpp): offers an old version's sums, applies REUSE.
    void offer_old_version(RecvFile& f);
    void on_reuse(const wire::Reuse& r);
    void register_entry(wire::ManifestEntry&& e, std::vector<wire::ByteRange>& already);
    void register_file(RecvFile& f, std::vector<wire::ByteRange>& already);
    void finish_empty_file(RecvFile& f);
    void on_manifest_end(const wire::ManifestEnd& e);
    void on_transfer_end(const wire::TransferEnd& end, uint16_t stream_count);
    void send(const wire::Bytes& frame) {
        control_.write(frame, "control connection");
        working_sent_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
    // Waits until the next frame starts to arrive; throws timed_out once the sender has been
    // silent for the idle timeout while it owed us something.
    void await_frame(uint16_t stream_count);

    const RecvOptions& opts_;
    RecvTarget& target_;
    FileTable& files_;
    RecvTally& tally_;
    ControlChannel& control_;
    SessionLog& log_;
    FailureLatch& latch_;
    ResendPolicy resends_;
    SumsCache sums_cache_;
    std::string sums_note_; // why the cache stored nothing, if it could not
    UpdateSide update_; // control thread only
    TransferPulse pulse_{tally_.bytes_received, tally_.files_completed};
    bool silence_reported_ = false; // await_frame() threw: its message says it all
    // When we last sent the sender anything (still_working() counts from there).
    std::atomic<std::chrono::steady_clock::rep> working_sent_{std::chrono::steady_clock::now().time_since_epoch().count()};

    // Read by data streams too.
    std::atomic<uint64_t> files_expected_{UINT64_MAX}; // known at MANIFEST_END
    std::atomic<bool> all_verified_sent_{false};
    // Announce window: files registered, and the complete count last sent in FILES_DONE.
    bool window_ = false;
    std::atomic<uint64_t> files_announced_{0};
    std::atomic<uint64_t> done_reported_{0};
    std::mutex done_mu_;
    void report_done();

    // Control thread only.
    Counts counts_;
    // Entries in the file table, or in kept_ once the table released their slab.
    std::vector<const wire::ManifestEntry*> dirs_, links_;
    std::deque<wire::ManifestEntry> kept_; // stable addresses
    void keep_released(std::span<const RecvFile> entries);
    RecvFile* pipe_entry_ = nullptr;
    uint32_t pages_ = 0;
    bool manifest_ended_ = false;
    std::string last_parent_ = "\x01"; // no real path equals this
    ParentDirCache parent_dirs_{target_.tree()}; // the quick check's fstatat, per run of a directory's files
    // The entry just registered was complete in place (the quick check): its lstat, so that
    // metadata already in place is not applied again (TreeMeta::add_meta).
    std::optional<struct stat> in_place_;
    int in_place_dir_ = -1; // with in_place_: its directory (parent_dirs_'), where exact lists are read
    // Owners, attributes, hard links, special files (issue 17): bounded like the file table.
    bool tree_options_ = false;        // TREE_OPTIONS arrived (at most once)
    std::optional<TreeMirror> mirror_; // --delete, from TREE_OPTIONS
    std::optional<DryRunItems> dry_;   // --dry-run, from TREE_OPTIONS: what would change, page by page
    std::vector<std::string> deleted_;
    TreeMeta tree_meta_{OwnerMap(opts_.numeric_ids, opts_.usermap, opts_.groupmap, opts_.chown), opts_.max_manifest_bytes ? opts_.max_manifest_bytes : FileTable::default_max_bytes(), opts_.sender_trust};
    uint8_t sender_features_ = 0; // set at the start of every transfer (RecvSession::start_transfer)
};

} // namespace sluice
