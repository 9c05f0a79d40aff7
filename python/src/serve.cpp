// sluice._sluice.Server and get: sluice::Server run on a thread of its own (start/stop, the
// GIL released while stopping), and sluice::get with progress, log and cancel wired like send.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <exception>
#include <memory>
#include <thread>

#include "bindings.hpp"
#include "blocking_call.hpp"
#include "convert.hpp"
#include "options.hpp"
#include "send_call.hpp"
#include "sluice/get.hpp"
#include "sluice/server.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

ServeOptions serve_options(const py::dict& o) {
    ServeOptions s;
    s.bind_address = o["bind_address"].cast<std::string>();
    s.http_port = o["http_port"].cast<uint16_t>();
    s.threads = o["threads"].cast<unsigned>();
    s.public_reads = o["public"].cast<bool>();
    s.token = o["token"].cast<std::string>();
    s.max_connections = o["max_connections"].cast<unsigned>();
    if (!o["port"].is_none()) {
        s.get_sessions = true;
        s.port = o["port"].cast<uint16_t>();
    }
    s.max_get_sessions = o["max_gets"].cast<unsigned>();
    s.get_rate_limit = o["get_rate_limit"].cast<uint64_t>();
    s.allow_upload = o["allow_upload"].cast<bool>();
    s.sync_uploads = o["sync"].cast<bool>();
    s.max_upload_bytes = o["max_upload_size"].cast<uint64_t>();
    s.max_uploads = o["max_uploads"].cast<unsigned>();
    if (o.contains("max_pushes")) s.max_pushes = o["max_pushes"].cast<unsigned>();
    if (o.contains("push_trust")) { // sluice/_serve.py: "none", "owners" or "full"
        const std::string t = o["push_trust"].cast<std::string>();
        s.push_trust = t == "full" ? SenderTrust::full : t == "owners" ? SenderTrust::owners : SenderTrust::none;
    }
    s.verbose = o["verbose"].cast<bool>();
    s.get_mptcp = o["mptcp"].cast<bool>();
    s.cert_file = o["cert"].cast<std::string>();
    s.key_file = o["key"].cast<std::string>();
    if (o.contains("certificates")) { // the sluice port's clients (sluice/_serve.py): ca, pins, crl
        py::dict c = o["certificates"].cast<py::dict>();
        s.ca_file = c["ca"].cast<std::string>();
        s.pins = c["pins"].cast<std::vector<std::string>>();
        s.crl_file = c["crl"].cast<std::string>();
    }
    return s;
}

// The server and the thread that runs it. stop() (or the destructor) drains and joins; an
// error the server's run() raised is raised by stop().
class PyServer {
public:
    PyServer(const std::string& dir, const py::dict& o) {
        ServeOptions opts = serve_options(o);
        py::gil_scoped_release nogil;
        server_ = std::make_unique<Server>(std::filesystem::path(dir), std::move(opts));
        thread_ = std::thread([this] {
            try {
                server_->run();
            } catch (...) {
                failure_ = std::current_exception();
            }
        });
    }
    ~PyServer() {
        if (thread_.joinable()) {
            server_->stop();
            thread_.join();
        }
    }
    uint16_t port() const { return server_->port(); }
    uint16_t get_port() const { return server_->get_port(); }
    std::string stats_json() const { return server_->stats().to_json(); }
    void stop() {
        {
            py::gil_scoped_release nogil;
            if (thread_.joinable()) {
                server_->stop();
                thread_.join();
            }
        }
        if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    }

private:
    std::unique_ptr<Server> server_;
    std::thread thread_;
    std::exception_ptr failure_;
};

} // namespace

void bind_serve(py::module_& m) {
    py::class_<PyServer>(m, "Server")
        .def(py::init<const std::string&, const py::dict&>())
        .def_property_readonly("port", &PyServer::port)
        .def_property_readonly("get_port", &PyServer::get_port)
        .def("stats_json", &PyServer::stats_json)
        .def("stop", &PyServer::stop);

    m.def("get", [](const std::string& url, const std::string& remote_path, const std::string& dest, const py::dict& o) {
        Endpoint from = endpoint(url, o);
        // Read here, with the GIL: run_send runs the call on a thread of its own without it, where
        // o["..."] made and dropped Python objects unlocked (a race on their reference counts:
        // pybind11's check aborted python-serve under scripts/test-tsan's debug build).
        const RecvPath path = parse_recv_path(o["recv_path"].cast<std::string>());
        const bool sync = o["sync"].cast<bool>(), verify = o["verify"].cast<bool>();
        const bool connect_back = o["connect_back"].cast<bool>();
        return run_send(o, [&](const SendOptions& so) {
            GetOptions g;
            g.streams = so.streams;
            g.connect_timeout_ms = so.connect_timeout_ms;
            g.idle_timeout_ms = so.idle_timeout_ms;
            g.verbose = so.verbose;
            g.log = so.log;
            g.progress = so.progress;
            g.cancel = so.cancel;
            g.path = path;
            g.sync = sync;
            g.verify = verify;
            g.connect_back = connect_back;
            g.mptcp = so.mptcp;
            g.encrypt = so.encrypt;
            g.certificates = so.certificates;
            return get(from, remote_path, dest, g);
        });
    });
}

} // namespace sluice::python
