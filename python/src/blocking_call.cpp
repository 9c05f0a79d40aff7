#include "blocking_call.hpp"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "convert.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

void deliver_logs(Watch& w) {
    if (!w.log) return;
    for (const auto& line : w.log->drain()) {
        if (w.on_log && !w.on_log.is_none()) {
            w.on_log(line);
        } else {
            py::module_::import("logging").attr("getLogger")("sluice").attr("warning")(line);
        }
    }
}

void deliver_progress(Watch& w, std::chrono::steady_clock::time_point start) {
    if (!w.progress || !w.on_progress || w.on_progress.is_none()) return;
    py::dict d = progress_to_dict(*w.progress);
    d["elapsed"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    w.on_progress(d);
}

} // namespace

Stats run_blocking(const std::function<Stats()>& call, Watch& w) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::optional<Stats> result;
    std::exception_ptr failure;

    const auto start = std::chrono::steady_clock::now();
    const auto interval = std::chrono::duration<double>(w.interval_s);
    // The first Python error seen while the call runs; raised after the call has stopped.
    std::optional<py::error_already_set> pending;

    std::thread worker;
    {
        py::gil_scoped_release nogil;
        worker = std::thread([&] {
            std::optional<Stats> r;
            std::exception_ptr f;
            try {
                r = call();
            } catch (...) {
                f = std::current_exception();
            }
            std::lock_guard lk(mu);
            result = std::move(r);
            failure = f;
            done = true;
            cv.notify_all();
        });
    }
    for (;;) {
        bool finished;
        {
            py::gil_scoped_release nogil;
            std::unique_lock lk(mu);
            cv.wait_for(lk, interval, [&] { return done; });
            finished = done;
        }
        try {
            deliver_logs(w);
            if (finished) break;
            if (pending) continue; // cancelled already; wait for the call to stop
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            deliver_progress(w, start);
        } catch (py::error_already_set& e) {
            if (!pending) {
                pending.emplace(std::move(e));
                py::gil_scoped_release nogil;
                w.cancel();
            }
            if (finished) break;
        }
    }
    {
        py::gil_scoped_release nogil;
        worker.join();
    }
    if (pending) throw std::move(*pending);
    if (failure) std::rethrow_exception(failure);
    deliver_progress(w, start); // the final figures, once
    return std::move(*result);
}

} // namespace sluice::python
