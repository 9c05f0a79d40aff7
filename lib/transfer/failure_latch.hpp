#pragma once
// The sender's record of why a transfer stops. Threads poll stopped() between units of work.
#include <atomic>
#include <mutex>
#include <optional>
#include <string>

#include "sluice/error.hpp"

namespace sluice {

// First failure wins; everything after it is a consequence.
class FailureLatch {
public:
    void fail(const Error& e) {
        std::lock_guard lk(mu_);
        if (!error_) error_ = e;
        stop_ = true;
    }
    void peer_abort(const std::string& message) {
        std::lock_guard lk(mu_);
        if (!error_) peer_message_ = message; // an echo of our own abort adds nothing
        stop_ = true;
    }
    std::string message() {
        std::lock_guard lk(mu_);
        return error_ ? error_->what() : "sender stopped";
    }
    bool stopped() const { return stop_.load(std::memory_order_relaxed); }
    [[noreturn]] void rethrow() {
        std::lock_guard lk(mu_);
        if (peer_message_) throw Error(ErrorCode::destination, "receiver aborted the transfer: " + *peer_message_);
        if (error_) throw *error_;
        throw Error(ErrorCode::internal, "transfer stopped without a recorded error");
    }

private:
    std::mutex mu_;
    std::optional<Error> error_;
    std::optional<std::string> peer_message_;
    std::atomic<bool> stop_{false};
};

} // namespace sluice
