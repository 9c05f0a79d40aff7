#include "py_sink.hpp"

#include <string>

namespace py = pybind11;

namespace sluice::python {
namespace {

py::dict entry_dict(const SinkEntry& e) {
    py::dict d;
    d["id"] = e.id;
    d["path"] = e.path;
    d["size"] = e.size;
    d["mode"] = e.mode;
    d["mtime_ns"] = e.mtime_ns;
    d["is_pipe"] = e.is_pipe;
    return d;
}

} // namespace

PySink::PySink(py::object obj) : obj_(std::move(obj)) {
    if (!py::hasattr(obj_, "write"))
        throw Error(ErrorCode::usage, "sink " + py::repr(obj_).cast<std::string>() + " has no write(entry, offset, data) method");
    write_ = obj_.attr("write");
    entry_done_ = py::getattr(obj_, "entry_done", py::none());
}

PySink::~PySink() {
    py::gil_scoped_acquire gil; // the Python references are dropped here
    error_.reset();
    entry_done_ = py::object();
    write_ = py::object();
    obj_ = py::object();
}

void PySink::fail(const char* method) {
    // GIL held; the current Python error is fetched into e.
    py::error_already_set e;
    std::string msg = std::string("sink.") + method + "() raised " + e.what();
    {
        std::lock_guard lk(mu_);
        if (!error_) error_.emplace(std::move(e));
    }
    throw Error(ErrorCode::destination, msg);
}

void PySink::write(const SinkEntry& entry, uint64_t offset, std::span<const std::byte> data) {
    py::gil_scoped_acquire gil;
    PyObject* mv = PyMemoryView_FromMemory(reinterpret_cast<char*>(const_cast<std::byte*>(data.data())),
                                           static_cast<Py_ssize_t>(data.size()), PyBUF_READ);
    if (!mv) fail("write");
    py::object view = py::reinterpret_steal<py::object>(mv);
    try {
        write_(entry_dict(entry), offset, view);
    } catch (py::error_already_set& e) {
        // Release before restoring: calling into Python with an error set is not allowed, and
        // the sink's own exception is the one to report.
        try {
            view.attr("release")();
        } catch (py::error_already_set&) {}
        e.restore();
        fail("write");
    }
    // The library reuses the buffer, so nothing may keep a view of it past the call. A slice
    // of the view (a second view of the same managed buffer) cannot be revoked: fail loudly.
    bool kept = reinterpret_cast<PyMemoryViewObject*>(mv)->mbuf->exports > 1;
    try {
        view.attr("release")(); // raises BufferError while something holds a buffer of it
    } catch (py::error_already_set& e) {
        e.restore();
        fail("write");
    }
    if (kept) {
        PyErr_SetString(PyExc_BufferError, "a view of data was kept past the call; copy it (bytes(data)) instead");
        fail("write");
    }
}

void PySink::entry_done(const SinkEntry& entry) {
    py::gil_scoped_acquire gil;
    if (entry_done_.is_none()) return;
    try {
        entry_done_(entry_dict(entry));
    } catch (py::error_already_set& e) {
        e.restore();
        fail("entry_done");
    }
}

void PySink::raise_pending_error() {
    std::optional<py::error_already_set> e;
    {
        std::lock_guard lk(mu_);
        e.swap(error_);
    }
    if (e) throw std::move(*e);
}

} // namespace sluice::python
