#pragma once
// One function per binding file; module.cpp calls them all.
#include <pybind11/pybind11.h>

namespace sluice::python {

void bind_send(pybind11::module_& m);
void bind_receiver(pybind11::module_& m);
void bind_send_fds(pybind11::module_& m); // send_fds and send_pipe
void bind_serve(pybind11::module_& m);    // Server and get

} // namespace sluice::python
