#include "options.hpp"

#include <cmath>
#include <limits>

namespace py = pybind11;

namespace sluice::python {
namespace {

int timeout_ms(const py::dict& o, const char* key) {
    double s = o[key].cast<double>();
    if (!(s > 0) || s > 7 * 86400.0)
        throw Error(ErrorCode::usage, std::string(key) + "=" + std::to_string(s) + " is out of range (0 < seconds <= 604800)");
    return static_cast<int>(std::ceil(s * 1000));
}

} // namespace

SendOptions send_options(const py::dict& o) {
    SendOptions s;
    s.streams = o["streams"].cast<unsigned>();
    s.block_size = o["block_size"].cast<uint64_t>();
    s.rate_limit = o["rate_limit"].cast<uint64_t>();
    s.path = parse_send_path(o["send_path"].cast<std::string>());
    s.connect_timeout_ms = timeout_ms(o, "connect_timeout");
    s.idle_timeout_ms = timeout_ms(o, "idle_timeout");
    s.verbose = o["verbose"].cast<bool>();
    return s;
}

RecvOptions recv_options(const py::dict& o) {
    RecvOptions r;
    r.bind_address = o["bind_address"].cast<std::string>();
    r.advertise_host = o["advertise_host"].cast<std::string>();
    r.port = o["port"].cast<uint16_t>();
    if (!o["token"].is_none()) r.token = o["token"].cast<std::string>();
    r.path = parse_recv_path(o["recv_path"].cast<std::string>());
    r.sync = o["sync"].cast<bool>();
    r.verify = o["verify"].cast<bool>();
    r.idle_timeout_ms = timeout_ms(o, "idle_timeout");
    r.verbose = o["verbose"].cast<bool>();
    return r;
}

Endpoint endpoint(const std::string& url, const py::dict& o) {
    Endpoint e = parse_url(url);
    if (!o["token"].is_none()) e.token = o["token"].cast<std::string>();
    return e;
}

} // namespace sluice::python
