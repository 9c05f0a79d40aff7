#pragma once
#include <pybind11/pybind11.h>

namespace sluice::python {

// Raises every sluice::Error crossing into Python as the sluice.Error subclass for its code
// (sluice/_errors.py), carrying .code and the library's message.
void register_error_translator();

} // namespace sluice::python
