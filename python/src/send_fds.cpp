// sluice._sluice.send_fds and send_pipe: ranges of open files, and a byte stream of unknown
// length, with the GIL released while bytes move. Every fd stays the caller's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "send_call.hpp"

namespace py = pybind11;

namespace sluice::python {

void bind_send_fds(py::module_& m) {
    // sources: (fd, offset, length, name, mode, mtime_ns) tuples, checked by sluice/__init__.py.
    m.def("send_fds", [](const std::vector<std::tuple<int, uint64_t, uint64_t, std::string, uint32_t, int64_t>>& sources,
                         const std::string& url, const py::dict& o) {
        std::vector<FdSource> files;
        files.reserve(sources.size());
        for (const auto& [fd, offset, length, name, mode, mtime_ns] : sources)
            files.push_back(FdSource{fd, offset, length, name, mode, mtime_ns});
        Endpoint to = endpoint(url, o);
        return run_send(o, [&](const SendOptions& opts) { return send(files, to, opts); });
    });
    m.def("send_pipe", [](int fd, const std::string& url, const py::dict& o) {
        Endpoint to = endpoint(url, o);
        return run_send(o, [&](const SendOptions& opts) { return send_pipe(fd, to, opts); });
    });
}

} // namespace sluice::python
