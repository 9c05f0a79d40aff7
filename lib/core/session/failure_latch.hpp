#pragma once
// Either side's record of why a transfer stops. Threads poll stopped() between units of work.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "sluice/error.hpp"

namespace sluice {

// First failure wins; everything after it is a consequence. A transfer that completed (the
// receiver has sent its verdict) cannot fail any more: what breaks after that is the peer
// hanging up.
class FailureLatch {
public:
    // Returns true to the first failure only: the caller then does what a failure entails
    // (an ABORT to the peer, shutting connections down) exactly once.
    bool fail(const Error& e) {
        std::lock_guard lk(mu_);
        if (completed_) return false;
        stop_ = true;
        if (error_) return false;
        error_ = e;
        return true;
    }
    // Returns false if the transfer stopped first.
    bool complete() {
        std::lock_guard lk(mu_);
        if (stop_) return false;
        completed_ = true;
        return true;
    }
    void peer_abort(const std::string& message) {
        {
            std::lock_guard lk(mu_);
            // An echo of our own abort adds nothing; but a network error of ours is usually
            // the receiver hanging up after it aborted, and its reason is the one to show.
            if (!error_ || error_->code() == ErrorCode::network) peer_message_ = message;
            stop_ = true;
        }
        cv_.notify_all();
    }
    // Gives the receiver's ABORT a moment to arrive after a local network error.
    void await_peer_reason(std::chrono::milliseconds wait) {
        std::unique_lock lk(mu_);
        if (!error_ || error_->code() != ErrorCode::network) return;
        cv_.wait_for(lk, wait, [&] { return peer_message_.has_value(); });
    }
    std::string message() {
        std::lock_guard lk(mu_);
        return error_ ? error_->what() : "sender stopped";
    }
    bool stopped() const { return stop_.load(std::memory_order_relaxed); }
    // Stopped or completed: either way nothing is left to do.
    bool ended() {
        std::lock_guard lk(mu_);
        return stop_ || completed_;
    }
    std::optional<Error> error() {
        std::lock_guard lk(mu_);
        return error_;
    }
    [[noreturn]] void rethrow() {
        std::lock_guard lk(mu_);
        if (peer_message_)
            throw Error(ErrorCode::destination, "receiver aborted the transfer: " + *peer_message_, ErrorCause::peer_aborted);
        if (error_) throw *error_;
        throw Error(ErrorCode::internal, "transfer stopped without a recorded error");
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::optional<Error> error_;
    std::optional<std::string> peer_message_;
    bool completed_ = false;
    std::atomic<bool> stop_{false};
};

} // namespace sluice
