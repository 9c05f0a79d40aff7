#pragma once
// Where the data streams' hellos wait for the control connection's (connect.cpp, issue 16).
// A data stream connects (once the control connection's hello is written) and reads the
// receiver's hello while the control connection's handshake still runs (on an 80 ms path that handshake took 2.5 round trips, and the data
// streams' own 2.5 came after it: ~0.2 s before the first byte). Its own hello must not reach
// the receiver before the control connection's: the receiver admits a data stream only into
// a transfer its control connection has started (recv_session.cpp, admit()), and with TLS or
// certificates only once that connection's handshake (and the verdict) is done. So the hello
// is sent once the gate opens, with the features and deadlines the control connection's
// handshake settled.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

#include "core/wire/protocol.hpp"

namespace sluice {

class HelloGate {
public:
    struct Pass {
        wire::ClientHello hello; // the control connection's, features as both sides use them
        int connect_ms = 0;      // the deadlines scaled by its round trip (core/io/rtt_deadlines.hpp)
        int idle_ms = 0;
    };

    void open(Pass p) {
        {
            std::lock_guard lk(mu_);
            pass_ = std::move(p);
            closed_ = false;
        }
        cv_.notify_all();
    }
    // The control connection failed: every wait ends without a pass.
    void close() noexcept {
        {
            std::lock_guard lk(mu_);
            if (!pass_) closed_ = true;
        }
        cv_.notify_all();
    }
    // The pass if the gate is open already (a stream that starts late connects under it).
    std::optional<Pass> ready() const {
        std::lock_guard lk(mu_);
        return pass_;
    }
    // Blocks until open(): the pass; nullopt after close(), when stopped() says so (read
    // every 100 ms), or after wait_ms (a backstop: connect_transfer opens or closes the gate
    // on every path, each bounded by its own deadlines).
    std::optional<Pass> wait(int wait_ms, const std::function<bool()>& stopped) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
        std::unique_lock lk(mu_);
        while (!pass_ && !closed_) {
            if (stopped() || std::chrono::steady_clock::now() >= deadline) return std::nullopt;
            cv_.wait_for(lk, std::chrono::milliseconds(100));
        }
        return pass_;
    }

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::optional<Pass> pass_;
    bool closed_ = false;
};

} // namespace sluice
