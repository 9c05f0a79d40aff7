#include "recv/store/inode_reaper.hpp"

#include <system_error>
#include <utility>

namespace sluice {

InodeReaper::~InodeReaper() {
    {
        std::lock_guard lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    queue_.clear(); // none left unless no thread could be started
}

void InodeReaper::retire(UniqueFd old) {
    std::unique_lock lk(mu_);
    ++retired_;
    if (queue_.size() >= kMaxQueued) {
        lk.unlock();
        old.reset(); // here, on the caller's thread: the bound on fds held
        return;
    }
    queue_.push_back(std::move(old));
    if (idle_ == 0 && threads_.size() < kThreads) {
        try {
            threads_.emplace_back([this] { run(); });
        } catch (const std::system_error&) {
            // No thread: the queued fds are closed by the ones running, or by the destructor.
        }
    }
    lk.unlock();
    cv_.notify_one();
}

void InodeReaper::run() {
    std::unique_lock lk(mu_);
    for (;;) {
        ++idle_;
        cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
        --idle_;
        if (queue_.empty()) return; // stop_, nothing left
        UniqueFd fd = std::move(queue_.front());
        queue_.pop_front();
        lk.unlock();
        fd.reset(); // the inode's last reference: its blocks are freed (and discarded) here
        lk.lock();
    }
}

} // namespace sluice
