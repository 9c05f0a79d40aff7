#pragma once
// The planner's output: units of work that data streams take in FIFO order. A stream that
// finishes early takes the next unit, so no stream idles while another drains a long tail.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "send/plan/source_tree.hpp"

namespace sluice {

struct Segment {
    const SourceFile* file = nullptr;
    uint64_t offset = 0;
    uint64_t length = 0;
};

// One block of a large file, or a batch of whole small files sent back to back.
struct WorkItem {
    std::vector<Segment> segments;
};

// split_tail()'s pieces per block: 1 MiB of the default 8 MiB, so a stream at 10 Mbit/s holds
// the end for under a second, yet each piece is still over a hundred segments (its frame and
// checksum cost nothing next to its bytes).
inline constexpr uint64_t kTailPieces = 8;

class WorkQueue {
public:
    void push(WorkItem&& item) {
        {
            std::lock_guard lk(mu_);
            items_.push_back(std::move(item));
        }
        cv_.notify_one();
    }
    // No more items will come; pop() returns nullopt once the queue is empty.
    void close() {
        {
            std::lock_guard lk(mu_);
            closed_ = true;
        }
        cv_.notify_all();
    }
    // Every item of the transfer is queued (the manifest ended and every page was answered and
    // planned); a RESEND may still add one. The queue stays open: streams wait on it until close().
    void planned() {
        std::lock_guard lk(mu_);
        planned_ = true;
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
    // The next item if one is queued now, without waiting.
    std::optional<WorkItem> try_pop() {
        std::lock_guard lk(mu_);
        if (items_.empty()) return std::nullopt;
        return take_front();
    }
    std::optional<WorkItem> pop() {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return !items_.empty() || closed_; });
        if (items_.empty()) return std::nullopt;
        return take_front();
    }

    // As pop(), calling check() every `every` while it waits (check may throw): a stream
    // waiting for work watches its connection (send/session/stream_recovery.hpp).
    template <class Check> std::optional<WorkItem> pop_checking(std::chrono::milliseconds every, Check&& check) {
        std::unique_lock lk(mu_);
        while (!cv_.wait_for(lk, every, [&] { return !items_.empty() || closed_; })) {
            lk.unlock();
            check();
            lk.lock();
        }
        if (items_.empty()) return std::nullopt;
        return take_front();
    }

private:
    // Under mu_, items_ not empty.
    WorkItem take_front() {
        WorkItem& f = items_.front();
        if ((planned_ || closed_) && piece_ > 0 && items_.size() <= tail_items_ && f.segments.size() == 1 &&
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

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<WorkItem> items_;
    bool closed_ = false;
    bool planned_ = false;
    size_t tail_items_ = 0;
    uint64_t piece_ = 0, pieces_ = 0;
};

} // namespace sluice
