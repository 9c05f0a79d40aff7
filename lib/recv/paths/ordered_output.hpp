#pragma once
// Pipe mode, receiving side: pieces of one byte stream arrive on several data streams (each
// stream's pieces in increasing order) and must leave in stream order. The data stream
// holding the piece that starts at the next output offset has the turn; the others wait with
// their piece parked in their own pipe or buffer. The data stream holding the lowest undelivered
// piece always has it at its head, so waiting never deadlocks.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "core/io/aligned_buffer.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

class OrderedOutput {
public:
    // Bytes go to out_fd (spliced from a pipe where it accepts splice).
    explicit OrderedOutput(int out_fd);
    // Bytes go to the caller's sink, in order, one call at a time.
    explicit OrderedOutput(Sink& sink);

    void set_entry(const SinkEntry& e);
    const SinkEntry& entry() const { return entry_; }

    // Blocks until `offset` is the next byte to leave; throws once the transfer has stopped,
    // or (network, timed_out) once the sender has been silent for idle_timeout_ms while the
    // output waited for the piece before ours: nobody had the turn and no data arrived on
    // any stream (a sender that leaves a gap in the byte stream and stops).
    void wait_turn(uint64_t offset, int idle_timeout_ms);
    // A data stream received part of a piece: the sender is not silent. One clock read and
    // one store per call: call it per receive, not per byte.
    void note_arrival() noexcept { arrived_.store(std::chrono::steady_clock::now().time_since_epoch().count()); }
    // Ends the turn taken by wait_turn: `length` bytes starting at its offset have left.
    void end_turn(uint64_t length);
    // Wakes every waiter for good (the transfer failed).
    void stop();
    uint64_t delivered() const;

    // With the turn: moves n bytes from a pipe's read end to the output fd.
    void drain_pipe(int pipe_read_fd, size_t n);
    // With the turn: hands bytes to the sink (or writes them to the fd).
    void write(uint64_t offset, std::span<const unsigned char> data);

    bool to_sink() const { return sink_ != nullptr; }
    std::string fallback() const;

private:
    void write_fd_all(const unsigned char* p, size_t n);
    [[noreturn]] void output_failed(int err);

    int out_fd_ = -1;
    Sink* sink_ = nullptr;
    SinkEntry entry_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    uint64_t next_ = 0;
    bool turn_held_ = false; // a stream has the turn: the output moves at its pace, not the sender's
    std::chrono::steady_clock::time_point moved_ = std::chrono::steady_clock::now(); // next_ last changed
    std::atomic<std::chrono::steady_clock::rep> arrived_{0};
    uint64_t written_ = 0; // bytes that left, counted by the stream holding the turn
    bool stopped_ = false;
    bool copy_fallback_ = false; // the fd refused splice: bytes go through bounce_
    std::string fallback_reason_;
    std::string pipe_note_; // the output pipe could not be grown (set once, before any thread)
    AlignedBuffer bounce_{1u << 20};
};

} // namespace sluice
