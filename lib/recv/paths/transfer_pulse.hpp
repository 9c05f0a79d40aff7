#pragma once
// What a data stream's silence is judged by (docs/guarantees.md, "Deadlines"). A data stream
// carries only the batches the sender's streams happen to take: it may have nothing while the
// others carry every batch (a whole-suite run at load ~70, 5,000 small files: "no data from
// the sender on stream 4 for 60 s" while the rest went on), or while the manifest is still being
// exchanged and no batch is planned. One stream's silence says nothing about the sender; the
// transfer's does. So a stream whose idle timer fires waits again while anything of the
// transfer moved within the idle timeout (data on any stream, a file completed, a frame on the
// control connection, our own answer to a manifest page or the work before it), and fails
// only once nothing has.
//
// Data is not timed per block: the counters the streams keep anyway, and the bytes they read
// from their sockets (arrived(): every receive that returns bytes adds to a counter, no clock
// read, so a block trickling in over a slow link shows the transfer moving before it is
// whole), are looked at when a stream's timer fires and when the control thread's wait slices
// pass (a quarter of the idle timeout), so the hot paths pay one relaxed add per receive. A look dates a movement by when it saw it, so a
// stream can wait up to one more idle timeout after the transfer last moved: every wait still
// has a deadline, of at most twice the idle timeout. Each extra wait needs new evidence (bytes
// of the declared data, a completed file, a frame the control connection bounds on its own), so
// a peer that trickles holds the receiver no longer than it could by trickling on one stream.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice {

class TransferPulse {
public:
    using Clock = std::chrono::steady_clock;

    // bytes, files: the session's counters of data received and files completed.
    TransferPulse(const std::atomic<uint64_t>& bytes, const std::atomic<uint64_t>& files) noexcept;
    TransferPulse(const TransferPulse&) = delete;
    TransferPulse& operator=(const TransferPulse&) = delete;

    // The control thread took a frame the sender waits on the answer to (a manifest page: the
    // sender sends its data only after MANIFEST_ACK) ...
    void working() noexcept { working_.store(true); }
    // ... and has answered it.
    void answered(Clock::time_point now = Clock::now()) noexcept {
        moved(now);
        working_.store(false);
    }
    // A frame arrived on the control connection. (now: the caller's clock, for tests.)
    void moved(Clock::time_point now = Clock::now()) noexcept;
    // A data stream read n bytes from its socket (a receive or splice that returned bytes):
    // evidence of the transfer moving, dated by the next look. Per receive: no clock read.
    void arrived(uint64_t n) noexcept { arrived_.fetch_add(n, std::memory_order_relaxed); }
    // The bytes arrived() has counted.
    uint64_t arrivals() const noexcept { return arrived_.load(std::memory_order_relaxed); }
    // Looks at the data counters; a change since the last look is a movement, now. Any thread;
    // never per block (two loads, a clock read, a compare-and-swap on change).
    void look(Clock::time_point now = Clock::now()) noexcept;
    // Whether a data stream's silence of the idle timeout is excused: the control thread works
    // on a frame the sender waits for, or the transfer moved within the idle timeout. Read
    // when a stream's timer fires, never per block.
    bool excuses(int idle_timeout_ms, Clock::time_point now = Clock::now()) noexcept;

private:
    const std::atomic<uint64_t>& bytes_;
    const std::atomic<uint64_t>& files_;
    std::atomic<uint64_t> arrived_{0};
    std::atomic<bool> working_{false};
    std::atomic<uint64_t> seen_{0}; // bytes + files + arrivals at the last look (all only grow)
    std::atomic<Clock::rep> moved_at_;
};

} // namespace sluice
