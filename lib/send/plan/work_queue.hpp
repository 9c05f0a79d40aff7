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
    // The next item if one is queued now, without waiting.
    std::optional<WorkItem> try_pop() {
        std::lock_guard lk(mu_);
        if (items_.empty()) return std::nullopt;
        WorkItem w = std::move(items_.front());
        items_.pop_front();
        return w;
    }
    std::optional<WorkItem> pop() {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return !items_.empty() || closed_; });
        if (items_.empty()) return std::nullopt;
        WorkItem w = std::move(items_.front());
        items_.pop_front();
        return w;
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
        WorkItem w = std::move(items_.front());
        items_.pop_front();
        return w;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<WorkItem> items_;
    bool closed_ = false;
};

} // namespace sluice
