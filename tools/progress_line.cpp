#include "progress_line.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace sluice::cli {

namespace {

std::string human(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        ++u;
    }
    char b[32];
    std::snprintf(b, sizeof b, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
    return b;
}

} // namespace

ProgressLine::ProgressLine(const Progress& p, bool enabled) : progress_(p) {
    if (enabled) thread_ = std::thread([this] { run(); });
}

ProgressLine::~ProgressLine() {
    stop_ = true;
    if (thread_.joinable()) {
        thread_.join();
        std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
    }
}

void ProgressLine::run() {
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    uint64_t last_bytes = 0;
    auto last_t = t0;
    double rate = 0;
    while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        auto now = clock::now();
        uint64_t done = progress_.bytes_done.load();
        uint64_t total = progress_.bytes_total.load();
        double dt = std::chrono::duration<double>(now - last_t).count();
        if (dt > 0) rate = 0.7 * rate + 0.3 * static_cast<double>(done - last_bytes) / dt;
        last_bytes = done;
        last_t = now;
        char eta[32] = "--";
        if (rate > 0 && progress_.walk_done && total >= done) {
            double s = static_cast<double>(total - done) / rate;
            std::snprintf(eta, sizeof eta, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
        }
        // Per-stream state: a stream stuck "waiting" while others move shows a slow peer path.
        unsigned moving = 0, waiting = 0, n = progress_.stream_count.load();
        for (unsigned i = 0; i < n && i < progress_.streams.size(); ++i) {
            auto st = progress_.streams[i].state.load();
            moving += st == StreamState::moving;
            waiting += st == StreamState::waiting;
        }
        char streams[64] = "";
        if (n) std::snprintf(streams, sizeof streams, "  streams %u moving %u waiting", moving, waiting);
        if (progress_.is_pipe.load()) {
            // A byte stream: its length is known only at its end.
            std::fprintf(stderr, "\r\033[K%s  %s/s%s", human(static_cast<double>(done)).c_str(), human(rate).c_str(), streams);
        } else {
            std::fprintf(stderr, "\r\033[K%s / %s%s  %llu/%llu files  %s/s  ETA %s%s", human(static_cast<double>(done)).c_str(),
                         human(static_cast<double>(total)).c_str(), progress_.walk_done ? "" : "+",
                         static_cast<unsigned long long>(progress_.files_done.load()),
                         static_cast<unsigned long long>(progress_.files_total.load()), human(rate).c_str(), eta, streams);
        }
        std::fflush(stderr);
    }
}

} // namespace sluice::cli
