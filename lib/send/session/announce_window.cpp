#include "send/session/announce_window.hpp"

#include <string>

#include "sluice/error.hpp"

namespace sluice {

bool AnnounceWindow::full() const {
    std::lock_guard lk(mu_);
    return limit_ != 0 && announced_ - done_ >= limit_;
}

void AnnounceWindow::admit(const std::function<void()>& flush, const std::function<bool()>& stopped) {
    if (full()) {
        flush(); // not under our lock: it writes to the receiver
        std::unique_lock lk(mu_);
        waiting_since_ = Clock::now();
        // The timed wait is a second line only: stop() wakes us as soon as the transfer ends.
        while (limit_ != 0 && announced_ - done_ >= limit_ && !stopped()) cv_.wait_for(lk, std::chrono::milliseconds(100));
        waiting_since_.reset();
    }
    std::lock_guard lk(mu_);
    ++announced_;
    if (announced_ - done_ > peak_) peak_ = announced_ - done_;
}

void AnnounceWindow::done(uint64_t files) {
    {
        std::lock_guard lk(mu_);
        if (files < done_ || files > announced_)
            throw Error(ErrorCode::protocol, "FILES_DONE reports " + std::to_string(files) + " files complete after " +
                                                 std::to_string(done_) + ", with " + std::to_string(announced_) +
                                                 " announced");
        done_ = files;
    }
    cv_.notify_all();
}

void AnnounceWindow::stop() {
    { std::lock_guard lk(mu_); }
    cv_.notify_all();
}

std::optional<AnnounceWindow::Clock::time_point> AnnounceWindow::waiting_since() const {
    std::lock_guard lk(mu_);
    return waiting_since_;
}

uint64_t AnnounceWindow::peak() const {
    std::lock_guard lk(mu_);
    return peak_;
}

} // namespace sluice
