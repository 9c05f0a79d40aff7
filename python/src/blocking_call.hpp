#pragma once
// Runs one blocking library call (send, wait) so that Python stays responsive: the call runs on
// a helper thread without the GIL, while the calling Python thread sleeps without the GIL and
// wakes every `interval` to hand progress and log lines to Python callables, with the GIL held
// as usual. A Python exception from a callable, or a signal (Ctrl-C), cancels the transfer; the
// Python exception is raised once the call has returned.
#include <pybind11/pybind11.h>

#include <functional>

#include "log_queue.hpp"
#include "sluice/progress.hpp"
#include "sluice/stats.hpp"

namespace sluice::python {

struct Watch {
    const Progress* progress = nullptr; // counters the call updates
    pybind11::object on_progress;       // None, or callable(dict)
    double interval_s = 0.2;            // at most one progress call per interval
    LogQueue* log = nullptr;
    pybind11::object on_log;      // callable(str); None: the "sluice" logger
    std::function<void()> cancel; // asks the running call to stop; any thread
};

// Must be called with the GIL held; returns with it held. Library errors propagate as
// sluice::Error (translated to Python by errors.cpp).
Stats run_blocking(const std::function<Stats()>& call, Watch& watch);

} // namespace sluice::python
