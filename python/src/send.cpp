// sluice._sluice.send: sluice::send(paths) with the GIL released while bytes move.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "send_call.hpp"

namespace py = pybind11;

namespace sluice::python {

void bind_send(py::module_& m) {
    py::class_<CancelFlag>(m, "CancelFlag", "Set it from any thread to cancel the send() it was passed to.")
        .def(py::init<>())
        .def(
            "set", [](CancelFlag& f) { f.value.store(true); }, "Ask the transfer to stop; it raises sluice.Cancelled.")
        .def("is_set", [](const CancelFlag& f) { return f.value.load(); });

    m.def("send", [](const std::vector<std::string>& paths, const std::string& url, const py::dict& o) {
        Endpoint to = endpoint(url, o);
        return run_send(o, [&](const SendOptions& opts) { return send(paths, to, opts); });
    });
}

} // namespace sluice::python
