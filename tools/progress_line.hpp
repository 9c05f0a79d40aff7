#pragma once
// The progress line shown on a terminal: bytes, files, rate, ETA, redrawn a few times a
// second from the transfer's counters. Shown only when stderr is a TTY.
#include <atomic>
#include <thread>

#include "sluice/progress.hpp"

namespace sluice::cli {

class ProgressLine {
public:
    ProgressLine(const Progress& p, bool enabled);
    ~ProgressLine(); // stops and clears the line

private:
    void run();
    const Progress& progress_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

} // namespace sluice::cli
