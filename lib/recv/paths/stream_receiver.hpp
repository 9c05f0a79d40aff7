#pragma once
// A receive path: how one data stream turns BLOCK frames from its socket into verified bytes
// of files under DIR. Each stream thread owns one StreamReceiver.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/sluice.hpp"
#include "recv/paths/mark_policy.hpp"
#include "recv/store/dest_tree.hpp"
#include "recv/store/file_table.hpp"
#include "recv/store/sums_cache.hpp"
#include "core/tls/keys.hpp"
#include "core/wire/protocol.hpp"

namespace sluice {

// When the receiver last answered the sender on the control connection. The sender sends a
// manifest page's data only after its MANIFEST_ACK, so while the control thread works on a
// page (directories, empty files, fsyncs for --sync) and for an idle timeout after it has
// answered, a data stream that hears nothing is waiting for us, not for a silent sender.
class AnswerClock {
public:
    // The control thread took a frame the sender waits on the answer to.
    void working() noexcept { working_.store(true); }
    // ... and has answered it.
    void answered() noexcept {
        answered_.store(std::chrono::steady_clock::now().time_since_epoch().count());
        working_.store(false);
    }
    // Whether a data stream's silence of the idle timeout is our own doing (read on a
    // timeout only, never per block).
    bool excuses(int idle_timeout_ms) const noexcept {
        if (working_.load()) return true;
        auto since = std::chrono::steady_clock::now() -
                     std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(answered_.load()));
        return since < std::chrono::milliseconds(idle_timeout_ms);
    }

private:
    std::atomic<bool> working_{false};
    std::atomic<std::chrono::steady_clock::rep> answered_{0};
};

// What every stream shares with the session.
struct RecvContext {
    FileTable& files;
    const DestTree& tree;
    bool sync = false;
    bool verify = false;
    int idle_timeout_ms = 60000;
    Progress* progress = nullptr;
    std::atomic<uint64_t>& bytes_received;
    std::atomic<uint64_t>& files_completed;
    std::atomic<uint64_t>& bytes_verified_from_disk;
    // A block failed its checksum: asks the sender for it again, or throws an integrity
    // Error naming the file once it has failed too often.
    std::function<void(RecvFile& f, uint64_t offset, uint64_t length)> block_failed;
    // A file became complete (after it is in place).
    std::function<void()> file_completed;
    // Called during the receiver's own long work the sender may be waiting for (--verify's
    // read-back, --sync's fsyncs): keeps the sender's idle deadline from firing (WORKING).
    std::function<void()> still_working;
    // The control thread's answers: a stream's idle timer that fires while they excuse the
    // silence waits again instead of failing (silence_excused()).
    const AnswerClock* answers = nullptr;
    // Bytes a stream wrote with O_DIRECT (the direct path): stats' bytes_written_direct.
    std::atomic<uint64_t>* bytes_written_direct = nullptr;
    // Where a complete file with keep_sums leaves its block sums (recv/store/sums_cache.hpp).
    SumsCache* sums_cache = nullptr;
    // What the streams' low-water marks did (marked_wait.hpp): stats and -v.
    MarkTally* marks = nullptr;
};

// A data stream heard nothing for the idle timeout: true if that is the receiver's own doing
// (see AnswerClock) and the stream should wait again, false if the sender went silent.
inline bool silence_excused(const RecvContext& ctx) noexcept { return ctx.answers && ctx.answers->excuses(ctx.idle_timeout_ms); }

struct StreamReceipt {
    uint64_t blocks = 0;
    uint64_t bytes = 0;
};

class StreamReceiver {
public:
    virtual ~StreamReceiver() = default;
    // Receives until STREAM_END. Throws Error naming the file or the rule broken.
    virtual StreamReceipt run() = 0;
    // Why a slower way than the path's own was used, if it was (empty otherwise).
    virtual std::string fallback() const { return {}; }
    // After run() threw because the connection broke (issue 16's stream reconnect): finishes
    // every block that arrived whole (written, verified or asked for again) and returns how
    // many there were and their bytes: the first blocks the sender wrote to this connection.
    // nullopt where the path cannot tell; then the break fails the transfer.
    virtual std::optional<StreamReceipt> settle_after_break() { return std::nullopt; }
};

// keys: the stream is encrypted and its path opens the records itself (direct's when direct
// was asked: Stats::data_path says kRecordsDirectRecvPath; recv_write's for any other:
// kRecordsRecvPath); null: path as asked.
std::unique_ptr<StreamReceiver> make_stream_receiver(RecvPath path, int sock, unsigned stream_index, RecvContext& ctx,
                                                     const tls::LinkKeys* keys = nullptr);
inline constexpr const char* kRecordsRecvPath = "tls_records";
inline constexpr const char* kRecordsDirectRecvPath = "tls_direct";

// The two ways a data stream ends early, worded and caused alike on every path (the session
// tells a sender that hung up from one that went silent by the cause).
Error stream_went_silent(unsigned stream_index, int idle_timeout_ms);
// where: "the transfer", or the quoted file the stream was in.
Error stream_cut_short(unsigned stream_index, std::string_view where = "the transfer");

// Shared steps of every path (file_finisher.cpp).
// The file a BLOCK names, checked against the manifest: known id, a regular file, in bounds;
// and claimed for this stream (FileTable::claim): the block ends in block_verified() (or
// mark_verified with claimed), in RecvContext::block_failed, or disowned after a break.
RecvFile& file_for_block(FileTable& files, const wire::BlockPrefix& p, uint64_t data_length);
// Opens (creating) the temporary file of f for writing at offsets.
UniqueFd open_temp_file(ParentDirCache& dirs, const RecvFile& f);
// Opens an unnamed file (O_TMPFILE) in f's directory, for a file that arrives whole in one
// block: no temporary name to create and rename. Invalid fd when the file system refuses.
UniqueFd open_unnamed_file(ParentDirCache& dirs, const RecvFile& f);
// Sets size, mode and mtime, optionally fsyncs, and renames f into place (links it, when
// f.unnamed). With f.replaces, the old version's inode goes to the table's reaper to be closed
// there; a directory in the way gives way through the table's replacer (--delete) or is refused.
void finish_file(ParentDirCache& dirs, RecvFile& f, int fd, bool sync, FileTable& files);
// Records a block whose data is written (fd) and whose checksum matched. The block that
// completes its file finishes it (and drops its journal); any other is journaled, after an
// fdatasync with --sync, so that a resume skips it. fd < 0: nothing was written (the discard path, `--recv-path null`).
void block_verified(RecvContext& ctx, ParentDirCache& dirs, RecvFile& f, int fd, uint64_t offset, uint64_t length,
                    uint64_t checksum);
// A block whose checksum failed: its claim is given up before ctx.block_failed asks the sender
// again (the new copy, on any stream, claims it anew).
void block_failed(RecvContext& ctx, RecvFile& f, uint64_t offset, uint64_t length);

} // namespace sluice
