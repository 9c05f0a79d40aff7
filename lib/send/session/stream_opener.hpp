#pragma once
// Opening the data streams of a transfer side by side, in the background (issue 16): each
// stream costs about two and a half round trips (TCP connect, the receiver's hello, ours and
// its answer). Opened one after the other, 16 streams at 80 ms RTT spent ~3 s before the
// first byte moved; opened 8 at a time but all awaited before sending, 64 streams still lost
// 2-3.5 s of a 12 s run (docs/benchmarks.md, h16c). So the session starts sending on each
// stream as soon as it is open (await()), while the others are still opening: the manifest
// and the first streams' data overlap the rest of the openings.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice {

// At most this many handshakes in flight at once: the receiver keeps at most 16 pending
// handshakes per source address (recv/session/acceptor.cpp) and drops one at random beyond
// that, so a sender stays well below it.
inline constexpr unsigned kParallelOpens = 8;

class StreamOpener {
public:
    using Clock = std::chrono::steady_clock;
    StreamOpener() = default;
    ~StreamOpener() { join(); }
    StreamOpener(const StreamOpener&) = delete;
    StreamOpener& operator=(const StreamOpener&) = delete;

    // Runs open(i) for i = 1..count on background threads, up to `width` at once; open(i)
    // makes stream i ready to use (on a number the session already holds) or throws. A stream
    // whose connection was reset during its open is opened again, once, after the others and
    // alone (a receiver under a flood of connections drops pending handshakes at random). If
    // an open throws anything else, or stopped() says the transfer stopped, no new open starts.
    void start(unsigned count, unsigned width, std::function<void(unsigned)> open, std::function<bool()> stopped);

    // Blocks until stream i (from 1) is open: true; false if stopped() came first (checked
    // every 100 ms) or its open never started (another failed first). Throws the Error that
    // failed its own open.
    bool await(unsigned i, const std::function<bool()>& stopped);
    // Every stream: true once all are open; throws the first failure (lowest index).
    bool await_all(const std::function<bool()>& stopped);

    // Waits for the background threads (opens in flight end by their own deadlines, or at
    // once when the session shuts their sockets down).
    void join();
    // For -v: when the first and the last stream opened, from start().
    std::string timeline() const;

private:
    enum class State { pending, open, failed, abandoned };
    void run(unsigned width);
    void settle(unsigned i, State s, std::exception_ptr e = nullptr);

    std::function<void(unsigned)> open_;
    std::function<bool()> stopped_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<State> state_;
    std::vector<std::exception_ptr> error_;
    Clock::time_point t0_, first_, last_;
    unsigned opened_ = 0;
    std::thread thread_;
};

} // namespace sluice
