#include "convert.hpp"

#include <algorithm>

namespace py = pybind11;

namespace sluice::python {

py::dict stats_to_dict(const Stats& stats) { return py::module_::import("json").attr("loads")(stats.to_json()); }

py::dict progress_to_dict(const Progress& p) {
    py::dict d;
    d["bytes_done"] = p.bytes_done.load(std::memory_order_relaxed);
    d["bytes_total"] = p.bytes_total.load(std::memory_order_relaxed);
    d["files_done"] = p.files_done.load(std::memory_order_relaxed);
    d["files_total"] = p.files_total.load(std::memory_order_relaxed);
    d["walk_done"] = p.walk_done.load(std::memory_order_relaxed);
    py::list streams;
    size_t n = std::min<size_t>(p.stream_count.load(std::memory_order_relaxed), p.streams.size());
    for (size_t i = 0; i < n; ++i) {
        py::dict s;
        s["bytes"] = p.streams[i].bytes.load(std::memory_order_relaxed);
        s["state"] = stream_state_name(p.streams[i].state.load(std::memory_order_relaxed));
        streams.append(std::move(s));
    }
    d["streams"] = std::move(streams);
    return d;
}

} // namespace sluice::python
