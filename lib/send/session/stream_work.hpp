#pragma once
// What one data stream of the file sender (sender.cpp) does: takes work items from the queue
// (when --streams auto lets it: stream_governor.hpp), writes their blocks through its send
// path, and when its connection breaks reopens it and puts back what the old one did not
// deliver (stream_recovery.hpp). One StreamWork serves every stream thread of a session.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/session/session_log.hpp"
#include "core/wire/protocol.hpp"
#include "send/plan/work_queue.hpp"
#include "send/session/rate_limiter.hpp"
#include "send/session/stream_governor.hpp"
#include "sluice/sluice.hpp"

namespace sluice::tls {
class RecordWriter;
}

namespace sluice {

class BlockSender;
class ColdBlockSender;
class DirectBlockReader;
class SmallFileBatch;
class StreamLog;

class StreamWork {
public:
    // The session's parts the streams share (all outlive the StreamWork).
    struct Session {
        WorkQueue& queue;
        StreamGovernor& governor;
        RateLimiter& limiter;
        SessionLog& log;
        const SendOptions& opts;
        const Endpoint& to;
        const wire::ClientHello& hello;
        // on: a stream took work (the receiver owes nothing on the control connection while
        // one has some); off: it is done with it.
        std::function<void(bool on)> busy;
        std::function<bool()> stopped;   // the transfer failed
        std::function<bool()> cancelled; // SendOptions::cancel
        // The record of file id, held for a segment sent again after a break; nullptr if the
        // sender no longer has it (the receiver reported the file complete).
        std::function<const SourceFile*(uint64_t file_id)> hold_record;
    };
    explicit StreamWork(Session s) : s_(std::move(s)) {}

    // Runs stream i (socket sock) until the queue closes (or it ends at the tail, with nothing
    // left to carry: plan/work_queue.hpp) and returns what its last connection carried (its
    // STREAM_END), or nullopt if the transfer stopped. blocks and bytes count
    // what the stream delivered over all its connections; fallback says a slower path.
    // records: the stream is encrypted and its paths seal their own records into it (no
    // reconnect then: the session turned it off).
    std::optional<wire::StreamEnd> run(size_t i, int sock, SendPath path, uint64_t& blocks, uint64_t& bytes,
                                       std::string& fallback, StreamProgress* sp, tls::RecordWriter* records);

    unsigned reopened() const { return reopened_.load(); }
    // Streams that ended at the tail, with nothing left to carry (plan/work_queue.hpp).
    unsigned ended_at_tail() const { return ended_at_tail_.load(); }
    uint64_t resent_after_break() const { return resent_after_break_.load(); }
    // Bytes read with O_DIRECT (not in the page cache): by the streams' blocks
    // (paths/direct_block_reader.hpp: clear and encrypted) and by their small-file batches.
    uint64_t bytes_read_direct() const { return cold_bytes_.load() + batch_direct_bytes_.load(); }
    // The -v line that says how the blocks were read.
    std::string read_summary() const;

private:
    struct Cursor; // one stream's place: its log, the item it is on, its counts
    bool send_until_closed(Cursor& c, BlockSender& sender, std::optional<SmallFileBatch>& batch,
                           std::optional<ColdBlockSender>& cold);
    // The whole block this stream sends after the current one, if known now (never waited for).
    const Segment* cold_next(Cursor& c, const std::optional<SmallFileBatch>& batch);
    // Adds what batch and direct read to the session's counts (before they go).
    void count_reads(const std::optional<SmallFileBatch>& batch, const DirectBlockReader* direct);
    void reopen(Cursor& c, const Error& e);

    Session s_;
    std::atomic<unsigned> reopened_{0};           // stream connections reopened
    std::atomic<unsigned> ended_at_tail_{0};      // streams that ended before the queue closed
    std::atomic<uint64_t> resent_after_break_{0}; // bytes they had not delivered
    std::atomic<uint64_t> cold_blocks_{0}, cold_bytes_{0}, cold_unaligned_{0}, cold_ahead_{0}, cold_ahead_open_fd_{0}; // ColdBlockSender's
    std::atomic<uint64_t> batch_direct_files_{0}, batch_direct_bytes_{0};       // SmallFileBatch's
};

} // namespace sluice
