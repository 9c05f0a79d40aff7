#include "send/session/stream_work.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>

#include "send/paths/block_sender.hpp"
#include "send/paths/cold_block_sender.hpp"
#include "send/paths/small_file_batch.hpp"
#include "send/session/stream_recovery.hpp"

namespace sluice {

struct StreamWork::Cursor {
    size_t i;
    int sock;
    uint64_t& blocks;
    uint64_t& bytes;
    StreamProgress* sp;
    StreamLog log;                // this connection's blocks, for a reopen
    std::optional<WorkItem> item; // the item being sent
    size_t next = 0;              // of its segments, the first not yet written
    // The item taken from the queue before its turn, so that its first block's read can go
    // to the disk while this one is sent (ColdBlockSender's read ahead); sent next.
    std::optional<WorkItem> ahead;
    bool bounded = false; // its socket's unsent bytes bounded for the end in pieces
};

namespace {

// The end in pieces (WorkQueue::split_tail) has begun: from now on the stream's socket holds
// at most a piece it has not sent (TCP_NOTSENT_LOWAT), so the stream takes its next piece only
// as the link drains the last one. Without it the pieces went into the streams' autotuned send
// buffers as fast as they were handed out, and the slowest stream's backlog held the end as a
// whole block had (80 ms, 14% loss: the last 80 MB at ~80 Mbit/s, h16s). Only at the end: a
// bound through the whole transfer makes every refill wait on the thread's wake-up, which on a
// busy host costs rate. A hint: a socket that refuses it (a relay's socket pair) keeps its backlog.
void bound_backlog(int sock, uint64_t bytes) {
    const int v = static_cast<int>(bytes);
    ::setsockopt(sock, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v);
}

// Whose O_DIRECT reads of cold blocks the stream made: its ColdBlockSender's (clear) or its
// path's own (encrypted).
const DirectBlockReader* direct_of(const BlockSender& sender, const std::optional<ColdBlockSender>& cold) {
    return cold ? &cold->reader() : sender.direct_reader();
}

struct Busy {
    explicit Busy(const std::function<void(bool)>& f) : f_(f) { f_(true); }
    ~Busy() { f_(false); }
    const std::function<void(bool)>& f_;
};

} // namespace

std::optional<wire::StreamEnd> StreamWork::run(size_t i, int sock, SendPath path, uint64_t& blocks, uint64_t& bytes,
                                               std::string& fallback, StreamProgress* sp, tls::RecordWriter* records) {
    Cursor c{.i = i, .sock = sock, .blocks = blocks, .bytes = bytes, .sp = sp};
    auto sender = records ? make_tls_record_sender(*records, s_.opts.idle_timeout_ms)
                          : make_block_sender(path, sock, s_.opts.idle_timeout_ms);
    // Small whole files go through a read buffer (paths/small_file_batch.hpp), except on
    // read_send, the baseline that stays as it is.
    std::optional<SmallFileBatch> batch;
    if (path != SendPath::read_send || records) batch.emplace(sock);
    if (batch) batch->send_through(records);
    // Blocks not in the page cache are read with O_DIRECT and sent from the buffer they were
    // read into, on the paths that would otherwise fill the page cache with them (splice,
    // sendfile). zc reads its own with O_DIRECT; read_send is the baseline; an encrypted
    // stream's path (tls_records) reads its cold blocks with O_DIRECT itself, into its own
    // buffer, to seal them into its record slots.
    const bool cold_path = !records && (path == SendPath::splice || path == SendPath::sendfile);
    std::optional<ColdBlockSender> cold;
    if (cold_path) cold.emplace(sock, s_.opts.idle_timeout_ms);
    for (;;) {
        try {
            if (!send_until_closed(c, *sender, batch, cold)) {
                count_reads(batch, direct_of(*sender, cold));
                return std::nullopt; // the transfer stopped
            }
            break;
        } catch (const Error& e) {
            count_reads(batch, direct_of(*sender, cold));
            if (s_.opts.retry_for_ms <= 0 || !breaks_connection(e) || s_.stopped() || !c.log.complete()) throw;
            sender.reset(); // their rings let go of the old socket before its number is reused
            batch.reset();
            cold.reset();
            // Not busy meanwhile: a receiver silent on the control connection for the idle
            // timeout ends the transfer, and with it the attempts to reopen.
            reopen(c, e);
            sender = make_block_sender(path, sock, s_.opts.idle_timeout_ms);
            if (path != SendPath::read_send) batch.emplace(sock);
            if (cold_path) cold.emplace(sock, s_.opts.idle_timeout_ms);
        }
    }
    sender->reader().check_unchanged();
    count_reads(batch, direct_of(*sender, cold));
    fallback = sender->fallback();
    if (batch && !batch->fallback().empty()) fallback += (fallback.empty() ? "" : "; ") + batch->fallback();
    if (cold && !cold->fallback().empty()) fallback += (fallback.empty() ? "" : "; ") + cold->fallback();
    return wire::StreamEnd{.blocks = c.log.blocks(), .bytes = c.log.bytes()}; // this connection's
}

// The batch's reads run ahead across work items: what it holds goes out when the queue has
// nothing ready (the stream may wait for the next manifest page), not at the end of every item.
bool StreamWork::send_until_closed(Cursor& c, BlockSender& sender, std::optional<SmallFileBatch>& batch,
                                   std::optional<ColdBlockSender>& cold) {
    for (;;) {
        if (!c.item || c.next == c.item->segments.size()) {
            c.item.reset();
            c.next = 0;
            if (c.ahead) std::swap(c.item, c.ahead);
            // --streams auto may hold this stream back; an empty queue may wait for a page.
            if (!c.item && (!s_.governor.may_take(c.i) || !(c.item = s_.queue.try_pop(c.i)))) {
                if (batch || cold) {
                    Busy busy(s_.busy);
                    if (cold) cold->drain(); // its block goes before the batch's files
                    if (batch) batch->flush(false);
                }
                s_.governor.await_turn(c.i);
                if (s_.governor.retired(c.i)) { // --streams auto settled below this stream
                    s_.queue.leave(c.i);
                    break;
                }
                // Waiting, the stream watches its connection: a break found only at the next
                // write could come after the receiver has waited out its idle timeout. At the
                // tail it may end instead of waiting (plan/work_queue.hpp).
                bool left = false;
                c.item = s_.queue.pop_checking(
                    c.i, std::chrono::milliseconds(250),
                    [&] {
                        if (s_.opts.retry_for_ms > 0) check_connection(c.sock, static_cast<unsigned>(c.i + 1));
                    },
                    [&] { return s_.governor.settled_count(); }, left);
                if (left) ++ended_at_tail_;
                if (!c.item) break;
            }
        }
        Busy busy(s_.busy);
        if (!c.bounded)
            if (const uint64_t piece = s_.queue.splitting()) bound_backlog(c.sock, piece), c.bounded = true;
        if (s_.stopped()) return false;
        if (s_.cancelled()) throw Error(ErrorCode::cancelled, "transfer cancelled");
        while (c.next < c.item->segments.size()) {
            const Segment& seg = c.item->segments[c.next];
            const bool more = c.next + 1 < c.item->segments.size();
            const bool whole_block = !(batch && SmallFileBatch::fits(seg));
            // --bounded-resend: the blocks before this one are acknowledged before it goes out,
            // so a break re-sends at most this one (a break found here re-sends nothing).
            if (whole_block && s_.opts.bounded_resend && s_.opts.retry_for_ms > 0) {
                if (cold) cold->drain();
                if (batch) batch->flush(true);
                await_acknowledged(c.sock, static_cast<unsigned>(c.i + 1), s_.opts.idle_timeout_ms, s_.stopped);
            }
            // Read while the segment holds its file: the batch may let go of it in add().
            const bool last = seg.offset + seg.length == seg.file->size;
            if (!s_.limiter.acquire(seg.length, s_.stopped)) return false;
            c.log.sent(seg); // before the write: a block cut short is the receiver's to disown
            ++c.next;
            ++c.blocks;
            c.bytes += seg.length;
            if (!whole_block) {
                if (cold) cold->drain(); // the batch may write to the socket in add()
                batch->add(seg); // holds the file from here
            } else {
                if (batch) batch->flush(true);
                // The block after this one, read ahead by the path that reads cold blocks.
                const Segment* next = cold || sender.direct_reader() ? cold_next(c, batch) : nullptr;
                if (!(cold && cold->try_send(seg, more, next))) sender.send(seg, more, next);
                seg.file->let_go(); // the item's hold (SourceFile::hold); the reader keeps its own
            }
            if (c.sp) {
                c.sp->bytes += seg.length;
                s_.opts.progress->bytes_done += seg.length;
                if (last) s_.opts.progress->files_done += 1;
            }
        }
    }
    if (cold) cold->drain();
    if (batch) batch->flush(false);
    return true;
}

// The whole block this stream sends after the current one, if it is known now: the item's next
// segment, or the first of the next item, taken from the queue early (never waited for).
const Segment* StreamWork::cold_next(Cursor& c, const std::optional<SmallFileBatch>& batch) {
    const Segment* next = nullptr;
    if (c.next < c.item->segments.size()) {
        next = &c.item->segments[c.next];
    } else {
        if (!c.ahead && s_.governor.may_take(c.i) && !s_.stopped()) c.ahead = s_.queue.try_pop(c.i);
        if (c.ahead && !c.ahead->segments.empty()) next = &c.ahead->segments.front();
    }
    return next && !(batch && SmallFileBatch::fits(*next)) ? next : nullptr;
}

void StreamWork::count_reads(const std::optional<SmallFileBatch>& batch, const DirectBlockReader* direct) {
    if (batch) {
        batch_direct_files_ += batch->direct_reads();
        batch_direct_bytes_ += batch->direct_bytes();
    }
    if (direct) {
        cold_blocks_ += direct->blocks();
        cold_bytes_ += direct->bytes();
        cold_unaligned_ += direct->unaligned();
        cold_ahead_ += direct->read_ahead();
        cold_ahead_open_fd_ += direct->ahead_on_open_fd();
    }
}

std::string StreamWork::read_summary() const {
    std::string s = "read with O_DIRECT (not in the page cache): " + std::to_string(cold_blocks_.load()) + " blocks (" +
                    std::to_string(cold_bytes_.load()) + " bytes; " + std::to_string(cold_ahead_.load()) + " of them read ahead; " +
                    std::to_string(cold_ahead_open_fd_.load()) + " reads ahead on the fd already open for their file), " + std::to_string(batch_direct_files_.load()) +
                    " small files (" + std::to_string(batch_direct_bytes_.load()) + " bytes); the rest from the page cache";
    if (cold_unaligned_.load())
        s += "; " + std::to_string(cold_unaligned_.load()) + " blocks at offsets not a multiple of 4096 read through the page cache";
    return s;
}

// The connection broke (e): a new one for the same index, and what the old one did not
// deliver, with the rest of the item it was on, back on the queue for any stream.
void StreamWork::reopen(Cursor& c, const Error& e) {
    const unsigned index = static_cast<unsigned>(c.i + 1);
    s_.log.verbose_line("data stream " + std::to_string(index) + " broke (" + e.what() + "): reopening it");
    const wire::StreamResume whole =
        reopen_stream(c.sock, index, e.what(), s_.to, s_.opts, s_.hello,
                      std::chrono::steady_clock::now() + std::chrono::milliseconds(s_.opts.retry_for_ms),
                      [&] { return s_.stopped() || s_.cancelled(); });
    const uint64_t lost_blocks = c.log.blocks() - whole.blocks; // after() checks whole against the log
    // What was not delivered is named by file id: the records of files the receiver reported
    // complete may be gone, and such a file has no block the receiver still lacks.
    WorkItem again;
    uint64_t lost_bytes = 0;
    for (const StreamLog::Sent& b : c.log.after(whole, index)) {
        const SourceFile* f = s_.hold_record(b.file_id);
        if (!f)
            throw Error(ErrorCode::protocol, "receiver says data stream " + std::to_string(index) + " did not deliver a block of file id " +
                                                 std::to_string(b.file_id) + ", which it reported complete");
        again.segments.push_back(Segment{f, b.offset, b.length});
        lost_bytes += b.length;
    }
    if (c.item)
        for (size_t k = c.next; k < c.item->segments.size(); ++k) again.segments.push_back(c.item->segments[k]);
    c.item.reset();
    c.next = 0;
    c.blocks -= lost_blocks;
    c.bytes -= lost_bytes;
    if (c.sp) {
        c.sp->bytes -= lost_bytes;
        s_.opts.progress->bytes_done -= lost_bytes;
    }
    ++reopened_;
    resent_after_break_ += lost_bytes;
    s_.log.verbose_line("data stream " + std::to_string(index) + " reopened: " + std::to_string(lost_blocks) + " blocks (" +
                        std::to_string(lost_bytes) + " bytes) it had not delivered go out again on any stream");
    if (!again.segments.empty()) s_.queue.push(std::move(again));
}

} // namespace sluice
