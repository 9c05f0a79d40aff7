// The compiled half of the sluice package; sluice/__init__.py is the public face.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "sluice/url.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_sluice, m) {
    m.doc() = "libsluice bindings (use the sluice package, not this module)";
    sluice::python::register_error_translator();
    sluice::python::bind_send(m);
    sluice::python::bind_receiver(m);
    sluice::python::bind_send_fds(m);
    sluice::python::bind_serve(m);
    m.def("parse_size",
          [](const std::string& text, const std::string& option) { return sluice::parse_size(text, option.c_str()); });
    m.def("check_url", [](const std::string& url) { (void)sluice::parse_url(url); });
}
