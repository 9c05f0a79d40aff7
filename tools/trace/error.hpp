// The one exception type of sluice trace: caught in sluice_trace_main, printed as
// "sluice trace: error: <what>"; the exit status is 2 (1 is left to the traced command's own
// failures) unless the error says otherwise (127: the command could not be run, as in a shell).
#pragma once
#include <stdexcept>
#include <string>

namespace sluice::trace {

struct TraceError : std::runtime_error {
    explicit TraceError(const std::string& what, int exit_status = 2) : std::runtime_error(what), status(exit_status) {}
    int status;
};

// TraceError with ": strerror(err)" appended.
[[noreturn]] void throw_errno(const std::string& what, int err, int exit_status = 2);

} // namespace sluice::trace
