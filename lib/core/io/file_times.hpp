#pragma once
#include <sys/stat.h>

#include <cstdint>

namespace sluice {

// Access and modification times both set to mtime_ns, as futimens/utimensat take them.
struct FileTimes {
    timespec t[2];
    explicit FileTimes(int64_t mtime_ns) {
        t[0].tv_sec = t[1].tv_sec = mtime_ns / 1'000'000'000;
        t[0].tv_nsec = t[1].tv_nsec = mtime_ns % 1'000'000'000;
    }
};

} // namespace sluice
