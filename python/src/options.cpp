#include "options.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include <pybind11/stl.h>

namespace py = pybind11;

namespace sluice::python {
namespace {

// SLUICE_TOKEN, as the CLI reads it: the token without putting it in argv. Only a default:
// a token given in the call (token=, or the URL's) is used as given.
std::string env_token() {
    const char* t = std::getenv("SLUICE_TOKEN");
    return t ? std::string(t) : std::string();
}

int timeout_ms(const py::dict& o, const char* key) {
    double s = o[key].cast<double>();
    if (!(s > 0) || s > 7 * 86400.0)
        throw Error(ErrorCode::usage, std::string(key) + "=" + std::to_string(s) + " is out of range (0 < seconds <= 604800)");
    return static_cast<int>(std::ceil(s * 1000));
}

// "auto", "on" or "off" (sluice/__init__.py's _encrypt); absent: automatic.
Encrypt encrypt_of(const py::dict& o) {
    if (!o.contains("encrypt")) return Encrypt::automatic;
    const std::string v = o["encrypt"].cast<std::string>();
    if (v == "on") return Encrypt::on;
    if (v == "off") return Encrypt::off;
    if (v == "auto") return Encrypt::automatic;
    throw Error(ErrorCode::usage, "encrypt=" + v + ": expected True, False or None");
}

// {"cert", "key", "ca", "pins", "crl"} (sluice/_options.py's _certificates); absent: none.
Certificates certificates_of(const py::dict& o) {
    Certificates c;
    if (!o.contains("certificates")) return c;
    py::dict d = o["certificates"].cast<py::dict>();
    c.cert_file = d["cert"].cast<std::string>();
    c.key_file = d["key"].cast<std::string>();
    c.ca_file = d["ca"].cast<std::string>();
    c.pins = d["pins"].cast<std::vector<std::string>>();
    if (d.contains("crl")) c.crl_file = d["crl"].cast<std::string>();
    return c;
}

} // namespace

SendOptions send_options(const py::dict& o) {
    SendOptions s;
    s.streams = o["streams"].cast<unsigned>();
    if (o.contains("streams_auto")) s.streams_auto = o["streams_auto"].cast<bool>();
    s.block_size = o["block_size"].cast<uint64_t>();
    s.rate_limit = o["rate_limit"].cast<uint64_t>();
    s.path = parse_send_path(o["send_path"].cast<std::string>());
    s.connect_timeout_ms = timeout_ms(o, "connect_timeout");
    s.idle_timeout_ms = timeout_ms(o, "idle_timeout");
    if (o.contains("cc")) s.congestion_control = o["cc"].cast<std::string>();
    if (o.contains("mptcp")) s.mptcp = o["mptcp"].cast<bool>();
    s.encrypt = encrypt_of(o);
    s.certificates = certificates_of(o);
    s.verbose = o["verbose"].cast<bool>();
    // Trees (send() only; the other calls leave the defaults).
    if (o.contains("checksum")) s.checksum = o["checksum"].cast<bool>();
    if (o.contains("delete")) s.delete_extraneous = o["delete"].cast<bool>();
    if (o.contains("dry_run")) s.dry_run = o["dry_run"].cast<bool>();
    if (o.contains("announce_window")) s.announce_window = o["announce_window"].cast<uint64_t>(); // checked in __init__.py
    if (o.contains("filters")) s.filters = o["filters"].cast<std::vector<std::string>>();
    if (o.contains("usermap")) s.usermap = o["usermap"].cast<std::string>();
    if (o.contains("groupmap")) s.groupmap = o["groupmap"].cast<std::string>();
    for (auto [key, field] : {std::pair{"hard_links", &SendOptions::hard_links}, {"owner", &SendOptions::owner},
                              {"group", &SendOptions::group}, {"xattrs", &SendOptions::xattrs},
                              {"acls", &SendOptions::acls}, {"specials", &SendOptions::specials}})
        if (o.contains(key)) s.*field = o[key].cast<bool>();
    return s;
}

RecvOptions recv_options(const py::dict& o) {
    RecvOptions r;
    r.bind_address = o["bind_address"].cast<std::string>();
    r.advertise_host = o["advertise_host"].cast<std::string>();
    r.port = o["port"].cast<uint16_t>();
    r.token = o["token"].is_none() ? env_token() : o["token"].cast<std::string>(); // empty: a random one
    r.path = parse_recv_path(o["recv_path"].cast<std::string>());
    r.sync = o["sync"].cast<bool>();
    r.verify = o["verify"].cast<bool>();
    r.idle_timeout_ms = timeout_ms(o, "idle_timeout");
    if (o.contains("max_manifest_bytes")) r.max_manifest_bytes = o["max_manifest_bytes"].cast<uint64_t>();
    if (o.contains("cc")) r.congestion_control = o["cc"].cast<std::string>();
    if (o.contains("mptcp")) r.mptcp = o["mptcp"].cast<bool>();
    if (o.contains("numeric_ids")) r.numeric_ids = o["numeric_ids"].cast<bool>();
    if (o.contains("sums_cache")) r.sums_cache = o["sums_cache"].cast<std::string>();
    if (o.contains("usermap")) r.usermap = o["usermap"].cast<std::string>();
    if (o.contains("groupmap")) r.groupmap = o["groupmap"].cast<std::string>();
    r.encrypt = encrypt_of(o);
    r.certificates = certificates_of(o);
    r.verbose = o["verbose"].cast<bool>();
    return r;
}

Endpoint endpoint(const std::string& url, const py::dict& o) {
    Endpoint e = parse_url(url);
    if (!o["token"].is_none())
        e.token = o["token"].cast<std::string>(); // overrides the URL's, as it always has
    else if (e.token.empty())
        e.token = env_token();
    return e;
}

} // namespace sluice::python
