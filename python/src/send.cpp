// sluice._sluice.send: sluice::send(paths) with the GIL released while bytes move.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "blocking_call.hpp"
#include "convert.hpp"
#include "options.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

// Runs one send-like call with progress, log and cancel wired to the Python callables in o.
template <class Call>
py::dict run_send(const py::dict& o, Call&& call) {
    SendOptions opts = send_options(o);
    CancelFlag own;
    CancelFlag* flag = o["cancel"].is_none() ? &own : o["cancel"].cast<CancelFlag*>();
    Progress progress;
    LogQueue log;
    opts.cancel = &flag->value;
    opts.progress = &progress;
    opts.log = log.sink();

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

} // namespace

void bind_send(py::module_& m) {
    py::class_<CancelFlag>(m, "CancelFlag", "Set it from any thread to cancel the send() it was passed to.")
        .def(py::init<>())
        .def("set", [](CancelFlag& f) { f.value.store(true); }, "Ask the transfer to stop; it raises sluice.Cancelled.")
        .def("is_set", [](const CancelFlag& f) { return f.value.load(); });

    m.def("send", [](const std::vector<std::string>& paths, const std::string& url, const py::dict& o) {
        Endpoint to = endpoint(url, o);
        return run_send(o, [&](const SendOptions& opts) { return send(paths, to, opts); });
    });
}

} // namespace sluice::python
