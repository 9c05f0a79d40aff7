#include "log_queue.hpp"

namespace sluice::python {

void LogQueue::push(std::string_view line) {
    std::lock_guard lk(mu_);
    if (lines_.size() < kMaxPending) {
        lines_.emplace_back(line);
    } else {
        ++dropped_;
    }
}

std::vector<std::string> LogQueue::drain() {
    std::lock_guard lk(mu_);
    std::vector<std::string> out;
    out.swap(lines_);
    if (dropped_) {
        out.push_back(std::to_string(dropped_) + " more log lines dropped");
        dropped_ = 0;
    }
    return out;
}

LogFn LogQueue::log_fn() {
    return [this](std::string_view line) { push(line); };
}

} // namespace sluice::python
