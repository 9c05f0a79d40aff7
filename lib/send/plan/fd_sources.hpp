#pragma once
// send(FdSource): ranges of files the caller has open, checked before connecting and
// announced as manifest entries (their parent directories are created by the receiver).
#include <vector>

#include "send/plan/source_tree.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

struct CheckedFdSource {
    wire::ManifestEntry entry; // file_id = index in the caller's vector
    uint64_t base = 0;
    int fd = -1;
    uint64_t file_size = 0;
    int64_t file_mtime_ns = 0;
};

// Throws Error(source) for a bad fd or a range beyond its file, Error(usage) for a bad or
// repeated name; each message names the fd or the name.
std::vector<CheckedFdSource> check_fd_sources(const std::vector<FdSource>& sources);

// Emits one file entry per source, in order, as the tree walk would.
void walk_fd_sources(const std::vector<CheckedFdSource>& sources, WalkVisitor& visit);

// Fills the fields a SourceFile needs to read a caller's range.
void attach_fd_source(SourceFile& f, const CheckedFdSource& c);

} // namespace sluice
