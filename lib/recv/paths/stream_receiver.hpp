#pragma once
// A receive path: how one data stream turns BLOCK frames from its socket into verified bytes
// of files under DIR. Each stream thread owns one StreamReceiver.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sluice/sluice.hpp"
#include "recv/paths/mark_policy.hpp"
#include "recv/paths/transfer_pulse.hpp"
#include "recv/store/dest_tree.hpp"
#include "recv/store/file_table.hpp"
#include "recv/store/sums_cache.hpp"
#include "core/tls/keys.hpp"
#include "core/wire/protocol.hpp"

namespace sluice {

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
    // When the transfer last moved: a stream's idle timer that fires while it excuses the
    // silence waits again instead of failing (silence_excused()).
    TransferPulse* pulse = nullptr;
    // Bytes a stream wrote with O_DIRECT (the direct path): stats' bytes_written_direct.
    std::atomic<uint64_t>* bytes_written_direct = nullptr;
    // Where a complete file with keep_sums leaves its block sums (recv/store/sums_cache.hpp).
    SumsCache* sums_cache = nullptr;
    // What the streams' low-water marks did (marked_wait.hpp): stats and -v.
    MarkTally* marks = nullptr;
    // The sender's address ("192.0.2.7:40112"), for messages; set before any stream starts.
    std::string sender;
};

// A data stream heard nothing for the idle timeout: true if the transfer moved meanwhile or
// the receiver's own work is the cause (transfer_pulse.hpp) and the stream should wait again,
// false if the whole transfer went silent.
inline bool silence_excused(const RecvContext& ctx) noexcept { return ctx.pulse && ctx.pulse->excuses(ctx.idle_timeout_ms); }

// A receive on a data stream returned n bytes: the transfer moves (TransferPulse::arrived), so
// the other streams' idle timers see it while a block is still arriving, not once it is whole.
inline void credit_arrival(const RecvContext& ctx, size_t n) noexcept {
    if (ctx.pulse) ctx.pulse->arrived(n);
}

// A data stream's waits end every slice, a kQuietSlices-th of the idle timeout, even while the
// stream is receiving: a receive gathering a large read (MSG_WAITALL, or a socket's
// SO_RCVTIMEO) on a slow link then returns what it has each slice and credits it
// (credit_arrival), instead of once per idle timeout, which the other streams' timers could
// miss. A slice that ends with nothing counts toward the stream's silence (StreamQuiet).
inline constexpr int kQuietSlices = 4;
inline int quiet_slice_ms(int idle_timeout_ms) noexcept {
    return idle_timeout_ms <= 0 ? idle_timeout_ms : std::max(1, idle_timeout_ms / kQuietSlices);
}
// Counts a stream's slices that ended with nothing since it last received bytes.
class StreamQuiet {
public:
    // Bytes arrived.
    void heard() noexcept { slices_ = 0; }
    // A wait of one slice ended with nothing. True: wait again (not yet silent for the idle
    // timeout, or silent that long while silence_excused()); false: the stream went silent.
    bool wait_again(const RecvContext& ctx) noexcept {
        if (++slices_ < kQuietSlices) return true;
        slices_ = 0; // an excused silence waits a whole idle timeout again
        return silence_excused(ctx);
    }

private:
    int slices_ = 0;
};

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
Error stream_went_silent(unsigned stream_index, const RecvContext& ctx);
// where: "the transfer", or the quoted file the stream was in.
Error stream_cut_short(unsigned stream_index, std::string_view where = "the transfer");
// recv_exact on a data socket whose SO_RCVTIMEO is quiet_slice_ms() (set_stream_slices()): the
// bytes of each receive are credited (credit_arrival), a slice without bytes counts toward the
// stream's silence (StreamQuiet; bytes already read are kept); throws
// stream_went_silent, stream_cut_short, or a network Error naming `what`.
void recv_patiently(int sock, std::span<unsigned char> data, unsigned stream_index, const RecvContext& ctx,
                    const std::string& what);
// Sets a data socket's SO_RCVTIMEO to one slice (quiet_slice_ms()), for a
// path that waits with blocking system calls (recv_patiently, a splice in an io-wq worker).
void set_stream_slices(int sock, const RecvContext& ctx);

// Shared steps of every path (file_finisher.cpp).
// The file a BLOCK names, checked against the manifest: known id, a regular file, in bounds;
// and claimed for this stream (FileTable::claim): the block ends in block_verified() (or
// mark_verified with claimed), in RecvContext::block_failed, or disowned after a break.
RecvFile& file_for_block(FileTable& files, const wire::BlockPrefix& p, uint64_t data_length);
// Opens (creating) the temporary file of f for writing at offsets.
UniqueFd open_temp_file(ParentDirCache& dirs, const RecvFile& f);
// Opens an unnamed file (O_TMPFILE) in f's directory, for a file that arrives whole in one
// block: no temporary name to create and rename; f.unnamed is set. Invalid fd, and refused set,
// when the file system has no O_TMPFILE; throws on any other failure.
UniqueFd open_unnamed_file(ParentDirCache& dirs, RecvFile& f, bool& refused);
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
