#pragma once
// Log lines from the transfer's threads, held until the Python thread that waits for the
// transfer hands them to Python: those threads must never block on the GIL.
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/sluice.hpp"

namespace sluice::python {

class LogQueue {
public:
    // Lines beyond this many between two drains are counted, not kept (a log storm must not
    // grow memory without bound).
    static constexpr size_t kMaxPending = 1000;

    void push(std::string_view line);
    // The pending lines, plus one line saying how many were dropped, if any.
    std::vector<std::string> drain();
    // A LogFn that pushes into this queue; the queue must outlive every call of it.
    LogFn log_fn();

private:
    std::mutex mu_;
    std::vector<std::string> lines_;
    size_t dropped_ = 0;
};

} // namespace sluice::python
