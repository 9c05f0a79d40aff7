#pragma once
// Times as sluice carries them (signed nanoseconds since the epoch, the manifest's mtime_ns)
// and as the kernel takes them (timespec with 0 <= tv_nsec < 1e9). A time before 1970 with a
// fractional second (1969-12-31 23:59:59.5 is -500000000 ns, i.e. tv_sec -1, tv_nsec
// 500000000) needs floor division: C++'s / and % truncate toward zero and would give
// tv_sec 0, tv_nsec -500000000, which futimens refuses (EINVAL). Such files exist in
// restored archives.
#include <sys/stat.h>

#include <cstdint>
#include <limits>
#include <optional>

namespace sluice {

inline constexpr int64_t kNsPerSec = 1'000'000'000;

// The timespec of ns: floor division, so tv_nsec is always in [0, 1e9). Exact for every int64.
inline constexpr timespec timespec_of(int64_t ns) {
    int64_t sec = ns / kNsPerSec;
    int64_t nsec = ns % kNsPerSec;
    if (nsec < 0) {
        sec -= 1;
        nsec += kNsPerSec;
    }
    timespec t{};
    t.tv_sec = static_cast<time_t>(sec);
    t.tv_nsec = static_cast<long>(nsec);
    return t;
}

// Nanoseconds of a (kernel-normalised) timespec, or nothing when it lies outside what an
// int64 of nanoseconds holds (before 1677-09-21 or after 2262-04-11).
inline constexpr std::optional<int64_t> ns_of_checked(const timespec& t) {
    constexpr int64_t kMaxSec = std::numeric_limits<int64_t>::max() / kNsPerSec;
    constexpr int64_t kMinSec = std::numeric_limits<int64_t>::min() / kNsPerSec; // -9223372036
    const int64_t sec = static_cast<int64_t>(t.tv_sec);
    const int64_t nsec = static_cast<int64_t>(t.tv_nsec);
    if (nsec < 0 || nsec >= kNsPerSec) return std::nullopt;
    if (sec > kMaxSec || sec < kMinSec - 1) return std::nullopt;
    int64_t base = 0;
    if (sec == kMinSec - 1) {
        // INT64_MIN lies inside this second: only its top part is representable.
        if (nsec < kNsPerSec + std::numeric_limits<int64_t>::min() % kNsPerSec) return std::nullopt;
        base = (sec + 1) * kNsPerSec;
        return base - (kNsPerSec - nsec);
    }
    base = sec * kNsPerSec;
    if (base > std::numeric_limits<int64_t>::max() - nsec) return std::nullopt;
    return base + nsec;
}

// For a time the kernel just gave us and which is compared, not stored: saturates instead of
// failing (a file outside the range is refused where it is listed, see ns_of_checked).
inline constexpr int64_t ns_of(const timespec& t) {
    if (auto ns = ns_of_checked(t)) return *ns;
    return t.tv_sec < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
}

// Access and modification times both set to mtime_ns, as futimens/utimensat take them.
struct FileTimes {
    timespec t[2];
    explicit FileTimes(int64_t mtime_ns) { t[0] = t[1] = timespec_of(mtime_ns); }
};

} // namespace sluice
