#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/export.hpp"

namespace sluice {

// Final figures of one side of a transfer; the CLI's --json prints exactly these fields.
struct Stats {
    std::string role;           // "send" or "recv"
    uint64_t bytes = 0;         // payload bytes of regular files in the transfer
    uint64_t bytes_sent = 0;    // payload moved in this run (sender) / received (receiver)
    uint64_t bytes_skipped = 0; // already verified at the receiver (resume)
    uint64_t files = 0;         // regular files
    uint64_t dirs = 0;
    uint64_t symlinks = 0;
    uint64_t skipped_entries = 0; // fifos, sockets, devices (sender)
    uint64_t blocks = 0;
    uint64_t checksum_failures = 0;
    uint64_t bytes_verified_from_disk = 0; // receiver with --verify
    double seconds = 0;
    unsigned streams = 0;
    uint64_t block_size = 0;
    std::string data_path;              // the path that moved the bytes
    std::vector<std::string> fallbacks; // every slower path taken, with its reason
    std::string ring_mode;              // io_uring setup flags in use
    double cpu_user_s = 0;
    double cpu_sys_s = 0;
    uint64_t peak_rss_kb = 0;

    double throughput_mb_s() const { return seconds > 0 ? bytes_sent / seconds / 1e6 : 0; }
    SLUICE_EXPORT std::string to_json() const;
};

} // namespace sluice
