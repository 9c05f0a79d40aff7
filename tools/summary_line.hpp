#pragma once
#include <algorithm>
#include <cstdio>
#include <string>

#include "sluice/printable.hpp"
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

// --dry-run without --json: one line per path on stdout, rsync's itemized form, every path
// escaped (a deletion's is the receiver's text), then the totals on stderr.
inline void print_dry_run(const Stats& s) {
    uint64_t files = 0, bytes = 0, deletions = 0;
    for (const ItemizedChange& c : s.changes) {
        std::string line = c.item;
        line.resize(std::max<size_t>(line.size(), 11), ' ');
        line += " " + c.path;
        if (!c.target.empty()) line += (c.item[0] == 'h' ? " => " : " -> ") + c.target;
        std::printf("%s\n", printable(line).c_str());
        files += c.item[0] == '>';
        bytes += c.bytes;
        deletions += c.item[0] == '*';
    }
    std::fflush(stdout);
    std::fprintf(stderr, "dry run: %llu of %llu files would be sent (%.1f MB at most), %llu paths deleted; nothing was changed\n",
                 static_cast<unsigned long long>(files), static_cast<unsigned long long>(s.files), bytes / 1e6,
                 static_cast<unsigned long long>(deletions));
}

} // namespace sluice::cli
