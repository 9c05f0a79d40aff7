#pragma once
#include <cstdio>

#include "sluice/stats.hpp"

namespace sluice::cli {

// What was moved decides the wording; the command knows it from its own arguments (`send -`,
// `recv --stdout`), as the library refuses the other kind on each of those.
enum class Moved { files, pipe };

// The one line a human sees at the end of a transfer (without --json).
inline void print_summary(const Stats& s, const char* verb, Moved moved) {
    if (moved == Moved::pipe) {
        std::fprintf(
            stderr, "%s a byte stream of %.1f MB in %.2f s: %.0f MB/s over %u streams, path %s, cpu %.2fs user %.2fs sys\n", verb,
            s.bytes_sent / 1e6, s.seconds, s.throughput_mb_s(), s.streams, s.data_path.c_str(), s.cpu_user_s, s.cpu_sys_s);
        return;
    }
    std::fprintf(stderr, "%s %llu files (%.1f MB) in %.2f s: %.0f MB/s over %u streams, path %s, cpu %.2fs user %.2fs sys\n",
                 verb, static_cast<unsigned long long>(s.files), s.bytes_sent / 1e6, s.seconds, s.throughput_mb_s(), s.streams,
                 s.data_path.c_str(), s.cpu_user_s, s.cpu_sys_s);
}

} // namespace sluice::cli
