#pragma once
// The caller's log function as a session calls it: from any of its threads, one call at a
// time (docs/api.md promises that), verbose lines only when asked for.
#include <mutex>
#include <string>
#include <string_view>

#include "sluice/sluice.hpp"

namespace sluice {

class SessionLog {
public:
    SessionLog(LogFn fn, bool verbose) : fn_(std::move(fn)), verbose_(verbose) {}

    bool verbose() const { return verbose_; }
    void line(std::string_view text) {
        if (!fn_) return;
        std::string shown = printable(text); // lines name paths from the peer's manifest
        std::lock_guard lk(mu_);
        fn_(shown);
    }
    void verbose_line(std::string_view text) {
        if (verbose_) line(text);
    }

private:
    LogFn fn_;
    bool verbose_;
    std::mutex mu_;
};

} // namespace sluice
