#pragma once
// The planner's output: units of work that data streams take in FIFO order. A stream that
// finishes early takes the next unit, so no stream idles while another drains a long tail.
//
// The tail (docs/guarantees.md, "Deadlines"): once the manifest has ended and every page's work
// is queued (planned_all()), only a RESEND or the blocks a broken stream did not deliver can
// still come. A stream waiting for work then has nothing to carry until ALL_VERIFIED, which
// comes only once the last stream's data has arrived: on a slow link one stream may carry the
// last batch for longer than the idle timeout while the others stay silent, and a receiver from
// before session 18 fails a data stream silent for its idle timeout (each stream judged alone;
// main's judges the transfer, but dates a stream's data only per chunk it completes, so a chunk
// slower than the idle timeout fails it too). So a waiting stream ends (STREAM_END) instead, and
// one stays for what may still come: the one that finished carrying last (its data reaches the
// receiver last, so it is silent the shortest), or, while another stream that stays to the end
// still carries, that one (it stays when it finishes, being then the last). The streams are
// numbered (0 to takers - 1) for this; the bookkeeping is a few fields per item taken, under the
// lock a pop takes anyway.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "send/plan/source_tree.hpp"

namespace sluice {

// split_tail()'s pieces per block: 1 MiB of the default 8 MiB, so a stream at 10 Mbit/s holds
// the end for under a second, yet each piece is still over a hundred segments (its frame and
// checksum cost nothing next to its bytes).
inline constexpr uint64_t kTailPieces = 8;

struct Segment {
    const SourceFile* file = nullptr;
    uint64_t offset = 0;
    uint64_t length = 0;
};

// One block of a large file, or a batch of whole small files sent back to back.
struct WorkItem {
    std::vector<Segment> segments;
};

class WorkQueue {
public:
    // How many streams take work (before any does).
    void set_takers(size_t n) {
        std::lock_guard lk(mu_);
        takers_.assign(n, Taker{});
    }
    void push(WorkItem&& item) {
        {
            std::lock_guard lk(mu_);
            items_.push_back(std::move(item));
        }
        cv_.notify_one();
    }
    // No more items will come; pop_checking() returns nullopt once the queue is empty.
    void close() {
        {
            std::lock_guard lk(mu_);
            closed_ = true;
        }
        cv_.notify_all();
    }
    // Every planned item is queued: only a RESEND or a broken stream's blocks may follow, and a
    // waiting stream may end (the tail, above).
    void planned_all() {
        {
            std::lock_guard lk(mu_);
            planned_all_ = true;
        }
        cv_.notify_all();
    }
    // The end of a transfer in pieces (issue 16, h16s): once every item is planned and at most
    // `items` are left, a one-segment item longer than `piece` is handed out `piece` bytes at a
    // time, the rest staying first in the queue. A stream takes a block whole and sends it at its
    // own rate; at 80 ms with 5-14% random loss one BBR stream moves 10-50 Mbit/s while another
    // moves 200, and the last 80-160 MB of a 1 GiB transfer took 6-9 s at 100-200 Mbit/s, the
    // other streams idle (h16s). In pieces the free streams take the rest of the last blocks.
    // The receiver takes any byte range as a block (a resume's already does). piece 0: off.
    void split_tail(size_t items, uint64_t piece) {
        std::lock_guard lk(mu_);
        tail_items_ = items;
        piece_ = piece;
    }
    // The piece size once the end in pieces has begun (a piece was handed out), else 0.
    uint64_t splitting() const {
        std::lock_guard lk(mu_);
        return pieces_ ? piece_ : 0;
    }
    // Items handed out as pieces so far (one count per piece), for -v.
    uint64_t pieces() const {
        std::lock_guard lk(mu_);
        return pieces_;
    }
    // The next item if one is queued now, without waiting; stream i carries it.
    std::optional<WorkItem> try_pop(size_t i) {
        std::lock_guard lk(mu_);
        if (items_.empty()) return std::nullopt;
        return take(i);
    }
    // Stream i ends for a reason of its own (--streams auto retired it): it stays for nothing.
    void leave(size_t i) {
        {
            std::lock_guard lk(mu_);
            finished(i);
            at(i).gone = true;
        }
        cv_.notify_all();
    }

    // Waits for the next item for stream i, calling check() every `every` while it waits (check
    // may throw): a stream waiting for work watches its connection
    // (send/session/stream_recovery.hpp). nullopt once the queue is closed and empty, or once
    // stream i ends at the tail (left set: the tail, above). stays_below(): the streams below
    // this index take work to the end (0 while --streams auto searches: none ends before).
    template <class Check, class StaysBelow>
    std::optional<WorkItem> pop_checking(size_t i, std::chrono::milliseconds every, Check&& check, StaysBelow&& stays_below,
                                         bool& left) {
        std::unique_lock lk(mu_);
        if (finished(i) && planned_all_) cv_.notify_all(); // the stream that stayed so far may end now
        auto ready = [&] { return !items_.empty() || closed_ || (left = ends_at_tail(i, stays_below())); };
        while (!cv_.wait_for(lk, every, ready)) {
            lk.unlock();
            check();
            lk.lock();
        }
        if (!items_.empty()) return take(i);
        if (left) at(i).gone = true;
        return std::nullopt;
    }

private:
    struct Taker {
        uint64_t finished = 0; // when it last ran out of work, in the order of finished_seq_ (0: never carried)
        bool carrying = false; // took an item and has not waited for work since
        bool gone = false;     // ended: takes nothing more
    };
    Taker& at(size_t i) {
        if (i >= takers_.size()) takers_.resize(i + 1); // a queue used without set_takers()
        return takers_[i];
    }
    // Under mu_, items_ not empty: the front item, or its first piece during the end in pieces.
    WorkItem take(size_t i) {
        at(i).carrying = true;
        WorkItem& f = items_.front();
        if ((planned_all_ || closed_) && piece_ > 0 && items_.size() <= tail_items_ && f.segments.size() == 1 &&
            f.segments[0].length > piece_) {
            Segment& rest = f.segments[0];
            const Segment first{rest.file, rest.offset, piece_};
            rest.offset += piece_;
            rest.length -= piece_;
            first.file->hold(); // each queued segment holds its file, let go by the stream that sends it
            ++pieces_;
            return WorkItem{{first}};
        }
        WorkItem w = std::move(f);
        items_.pop_front();
        return w;
    }
    // Stream i ran out of work: its finish is dated if it carried something. True if so.
    bool finished(size_t i) {
        Taker& t = at(i);
        if (!t.carrying) return false;
        t.carrying = false;
        t.finished = ++finished_seq_;
        return true;
    }
    // Whether waiting stream i ends now: at the tail, while another stream that stays to the
    // end carries, or once another finished carrying after it (the streams below stays_below
    // stay; one past it, retired by --streams auto, ends once it is done in any case). Nothing
    // ever carried: all wait, as before. The last of those below stays_below never ends here.
    bool ends_at_tail(size_t i, size_t stays_below) const {
        if (!planned_all_ || stays_below == 0) return false;
        if (i >= stays_below) return true;
        for (size_t j = 0; j < stays_below && j < takers_.size(); ++j) {
            const Taker& t = takers_[j];
            if (j != i && !t.gone && (t.carrying || t.finished > takers_[i].finished)) return true;
        }
        return false;
    }

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<WorkItem> items_;
    std::vector<Taker> takers_;
    uint64_t finished_seq_ = 0;
    bool closed_ = false;
    bool planned_all_ = false;
    size_t tail_items_ = 0;
    uint64_t piece_ = 0, pieces_ = 0;
};

} // namespace sluice
