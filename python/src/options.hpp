#pragma once
// Reads the option dicts that sluice/__init__.py builds (keys fixed there, values already
// normalised: sizes as ints, timeouts in seconds) into the library's option structs.
#include <pybind11/pybind11.h>

#include <atomic>

#include "sluice/sluice.hpp"

namespace sluice::python {

// A flag a Python thread sets to cancel a send(); shared with the library by pointer.
struct CancelFlag {
    std::atomic<bool> value{false};
};

// Fills everything but log, progress and cancel (the caller owns those objects).
SendOptions send_options(const pybind11::dict& o);
RecvOptions recv_options(const pybind11::dict& o);
// The URL with the token replaced when o["token"] is not None.
Endpoint endpoint(const std::string& url, const pybind11::dict& o);

} // namespace sluice::python
