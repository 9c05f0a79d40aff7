// sluice._sluice.Receiver: a listening sluice::Receiver whose wait() releases the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <memory>

#include "bindings.hpp"
#include "blocking_call.hpp"
#include "convert.hpp"
#include "options.hpp"
#include "py_sink.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

// Owns what the library borrows for the receiver's lifetime: the progress counters and the
// log queue (and, for sink receivers, the sink).
class PyReceiver {
public:
    // Into a directory.
    PyReceiver(const std::string& dir, const py::dict& o) : on_log_(o["log"]) {
        RecvOptions opts = options(o);
        py::gil_scoped_release nogil;
        rx_ = std::make_unique<Receiver>(std::filesystem::path(dir), std::move(opts));
    }
    // One pipe transfer into a borrowed fd.
    PyReceiver(int fd, const py::dict& o) : on_log_(o["log"]) {
        RecvOptions opts = options(o);
        py::gil_scoped_release nogil;
        rx_ = std::make_unique<Receiver>(OutputFd{fd}, std::move(opts));
    }
    // Into a Python object's write(entry, offset, data).
    PyReceiver(py::object sink, const py::dict& o) : on_log_(o["log"]), sink_(std::make_unique<PySink>(std::move(sink))) {
        RecvOptions opts = options(o);
        py::gil_scoped_release nogil;
        rx_ = std::make_unique<Receiver>(*sink_, std::move(opts));
    }

    std::string url() const { return rx_->url(); }
    uint16_t port() const { return rx_->port(); }

    py::dict wait(py::object on_progress, double interval_s) {
        if (waiting_.exchange(true)) throw Error(ErrorCode::usage, "Receiver.wait() is already running in another thread");
        struct Reset {
            std::atomic<bool>& f;
            ~Reset() { f.store(false); }
        } reset{waiting_};
        Watch w;
        w.progress = progress_.get();
        w.on_progress = std::move(on_progress);
        w.interval_s = interval_s;
        w.log = log_.get();
        w.on_log = on_log_;
        w.cancel = [this] { rx_->cancel(); };
        try {
            Stats s = run_blocking([this] { return rx_->wait(); }, w);
            return stats_to_dict(s);
        } catch (const Error&) {
            if (sink_) sink_->raise_pending_error(); // the sink's own exception, if it caused this
            throw;
        }
    }

    void cancel() {
        py::gil_scoped_release nogil;
        rx_->cancel();
    }

private:
    RecvOptions options(const py::dict& o) {
        RecvOptions opts = recv_options(o);
        opts.progress = progress_.get();
        opts.log = log_->log_fn();
        return opts;
    }

    // Heap-held so their addresses stay fixed for the library whatever pybind11 does.
    std::unique_ptr<Progress> progress_ = std::make_unique<Progress>();
    std::unique_ptr<LogQueue> log_ = std::make_unique<LogQueue>();
    py::object on_log_;
    std::atomic<bool> waiting_{false};
    std::unique_ptr<PySink> sink_;
    std::unique_ptr<Receiver> rx_; // declared last: destroyed first, before what it borrows
};

} // namespace

void bind_receiver(py::module_& m) {
    py::class_<PyReceiver>(m, "Receiver")
        .def(py::init<const std::string&, const py::dict&>())
        .def_static("for_fd", [](int fd, const py::dict& o) { return std::make_unique<PyReceiver>(fd, o); })
        .def_static("for_sink",
                    [](py::object sink, const py::dict& o) { return std::make_unique<PyReceiver>(std::move(sink), o); })
        .def_property_readonly("url", &PyReceiver::url)
        .def_property_readonly("port", &PyReceiver::port)
        .def("wait", &PyReceiver::wait)
        .def("cancel", &PyReceiver::cancel);
}

} // namespace sluice::python
