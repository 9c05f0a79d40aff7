#pragma once
// What the sender reads: the paths given on the command line, checked before connecting,
// and walked depth-first into manifest entries (parents before children).
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/protocol.hpp"

namespace sluice {

struct SourceRoot {
    std::string path; // as given
    std::string name; // its name under the destination directory
};

// A regular file the sender will read data from. Addresses stay valid while the transfer runs.
struct SourceFile {
    uint64_t file_id = 0;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    std::string path; // where to open it on this host
    std::string rel;  // its relative path in the transfer (for messages)
    // A range of a caller's open file (send(FdSource)): the data starts at `base` in the file,
    // which is reopened through /proc/self/fd/`fd` so the caller's file description is never
    // touched; its identity is its own size and mtime at listing.
    uint64_t base = 0;
    int fd = -1;
    uint64_t file_size = 0;
    int64_t file_mtime_ns = 0;
    uint64_t file_offset(uint64_t offset) const { return base + offset; }
};

// Throws Error(source) naming the first path that is missing, unreadable or not sendable,
// or two sources that would land under the same name.
std::vector<SourceRoot> check_sources(const std::vector<std::string>& paths);

struct WalkVisitor {
    // Every entry in manifest order; source_path is set for regular files.
    std::function<void(wire::ManifestEntry&& entry, std::string&& source_path)> entry;
    // One line per skipped entry (fifo, socket, device).
    std::function<void(std::string_view)> skipped;
};

// Assigns file ids from 0 upwards in the order entries are emitted.
void walk_sources(const std::vector<SourceRoot>& roots, const WalkVisitor& visit);

} // namespace sluice
