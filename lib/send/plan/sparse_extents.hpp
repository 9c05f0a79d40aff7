#pragma once
// Where a sparse file holds data (SEEK_DATA / SEEK_HOLE), so that its holes are described in
// the manifest instead of sent as zeros (docs/protocol.md, "Sparse files").
#include <cstdint>
#include <string>
#include <vector>

#include "core/wire/protocol.hpp"

namespace sluice {

struct SparseLayout {
    bool sparse = false;               // false: send the file as it is (no holes worth describing)
    std::vector<wire::Extent> extents; // sorted, disjoint, inside the size; at most kMaxExtentsPerFile
    uint64_t hole_bytes = 0;           // size minus the extents' bytes
};

// The walk's lstat said how much is allocated: kUnknownAllocation when it did not stat it.
inline constexpr uint64_t kUnknownAllocation = ~uint64_t{0};

// A file whose allocation (st_blocks) covers its size has no holes: with `allocated` from the
// walk's lstat that costs nothing, else one open and fstat. A file system without SEEK_DATA
// (EINVAL) or a file that cannot be opened here is sent whole: the sender reads it later
// anyway and reports that error then.
SparseLayout find_data_extents(const std::string& path, uint64_t size, uint64_t allocated = kUnknownAllocation);

// Merges the extents separated by the shortest holes (those holes are then sent as zeros)
// until at most `limit` remain. Exposed for the unit test.
void merge_extents(std::vector<wire::Extent>& extents, size_t limit);

} // namespace sluice
