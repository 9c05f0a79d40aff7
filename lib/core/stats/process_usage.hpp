#pragma once
// CPU and memory of this whole process (all threads, io_uring's io-wq workers included:
// they belong to the process's thread group).
#include <sys/resource.h>

#include <chrono>

namespace sluice {

struct ProcessUsage {
    double user_s = 0;
    double sys_s = 0;
    long peak_rss_kb = 0;

    static ProcessUsage now() {
        rusage ru{};
        ::getrusage(RUSAGE_SELF, &ru);
        ProcessUsage u;
        u.user_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
        u.sys_s = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
        u.peak_rss_kb = ru.ru_maxrss;
        return u;
    }
};

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

} // namespace sluice
