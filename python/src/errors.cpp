#include "errors.hpp"

#include "sluice/error.hpp"

namespace py = pybind11;

namespace sluice::python {

void register_error_translator() {
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const Error& e) {
            py::object cls = py::module_::import("sluice._errors").attr("class_for")(error_code_name(e.code()));
            py::object exc = cls(e.what());
            // What was detected (a closed peer, a timeout), for code that reacts to it without
            // reading the message; "none" for most errors.
            exc.attr("cause") = error_cause_name(e.cause());
            PyErr_SetObject(cls.ptr(), exc.ptr());
        }
    });
}

} // namespace sluice::python
