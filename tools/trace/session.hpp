// One trace from start to finish: preflight, load the probe, start or attach to the targets,
// follow events until they are done, then hand the raw counters to the accounting.
#pragma once
#include "model.hpp"
#include "options.hpp"

namespace sluice::trace {

// Runs the trace described by opts and returns the finished report.
Report run_trace(const Options& opts);

} // namespace sluice::trace
