#pragma once
// The receiver's side of sparse files (docs/protocol.md, "Sparse files"): the holes between a
// file's data extents are complete from the start (nothing is written there, so they stay
// holes on every receive path: the file's size is set by ftruncate when it is finished), and
// a BLOCK may only carry data inside an extent.
#include <cstdint>

#include "recv/store/file_table.hpp"

namespace sluice {

// Records every hole of f (a sparse entry) as verified, leaving out ranges an earlier run
// already verified (resume). Control thread, before the entry is published. Returns the
// bytes marked and whether that completed the file (a file that is all hole, or whose data
// a resumed run already holds).
struct Holes {
    uint64_t bytes = 0;
    bool complete = false;
};
Holes mark_holes(FileTable& files, RecvFile& f);

// Throws protocol Error naming the file unless [offset, offset + len) lies inside one data
// extent of f (always true for a file that is not sparse).
void check_inside_data(const RecvFile& f, uint64_t offset, uint64_t len);

} // namespace sluice
