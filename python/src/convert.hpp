#pragma once
// Turns library values into the Python objects the package hands out.
#include <pybind11/pybind11.h>

#include "sluice/progress.hpp"
#include "sluice/stats.hpp"

namespace sluice::python {

// The stats as a dict with exactly the fields (and values) of the CLI's --json: it is parsed
// from Stats::to_json() so the two can never drift apart.
pybind11::dict stats_to_dict(const Stats& stats);

// A snapshot of the polled counters: bytes/files done and total, walk_done, and one
// {"bytes", "state"} dict per data stream in use.
pybind11::dict progress_to_dict(const Progress& progress);

} // namespace sluice::python
