#pragma once
// The part every send binding shares: options from the dict, progress, log and cancel wired to
// the Python callables, the call run by run_blocking, the stats as a dict.
#include <pybind11/pybind11.h>

#include "blocking_call.hpp"
#include "convert.hpp"
#include "options.hpp"

namespace sluice::python {

// Runs one send-like call with progress, log and cancel wired to the Python callables in o.
template <class Call> pybind11::dict run_send(const pybind11::dict& o, Call&& call) {
    SendOptions opts = send_options(o);
    CancelFlag own;
    CancelFlag* flag = o["cancel"].is_none() ? &own : o["cancel"].cast<CancelFlag*>();
    Progress progress;
    LogQueue log;
    opts.cancel = &flag->value;
    opts.progress = &progress;
    opts.log = log.log_fn();

    Watch w;
    w.progress = &progress;
    w.on_progress = o["progress"];
    w.interval_s = o["progress_interval"].cast<double>();
    w.log = &log;
    w.on_log = o["log"];
    w.cancel = [flag] { flag->value.store(true); };
    Stats s = run_blocking([&] { return call(opts); }, w);
    return stats_to_dict(s);
}

} // namespace sluice::python
