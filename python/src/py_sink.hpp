#pragma once
// A sluice::Sink that hands the received data to a Python object:
//   obj.write(entry: dict, offset: int, data: memoryview)
//   obj.entry_done(entry: dict)            (optional)
// entry has id, path, size, mode, mtime_ns, is_pipe. The memoryview is read-only and valid
// only during the call (it is released afterwards: copy what you keep, e.g. bytes(data)).
// Called from the library's stream threads with the GIL taken for each call.
#include <pybind11/pybind11.h>

#include <mutex>
#include <optional>

#include "sluice/sluice.hpp"

namespace sluice::python {

class PySink : public Sink {
public:
    explicit PySink(pybind11::object obj);
    ~PySink() override;
    void write(const SinkEntry& entry, uint64_t offset, std::span<const std::byte> data) override;
    void entry_done(const SinkEntry& entry) override;

    // The first Python exception a callback raised (the transfer failed with its message);
    // wait() raises it instead of the library's error. GIL held.
    void raise_pending_error();

private:
    [[noreturn]] void fail(const char* method);

    pybind11::object obj_;
    pybind11::object write_;
    pybind11::object entry_done_; // None when obj has no entry_done
    std::mutex mu_;
    std::optional<pybind11::error_already_set> error_;
};

} // namespace sluice::python
