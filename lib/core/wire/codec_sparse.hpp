#pragma once
// A sparse file's data extents inside its manifest entry (docs/protocol.md, "Sparse files"):
// `count u32`, then count x `(offset u64, length u64)`, after the entry's path and target,
// present when the entry's flags have kEntrySparse. Internal to the codec.
#include "core/wire/byte_io.hpp"
#include "core/wire/protocol.hpp"

namespace sluice::wire {

void encode_extents(ByteWriter& w, const ManifestEntry& e);
// Sets e.sparse and e.data_extents; e.kind, e.size and e.path must be decoded already.
// Throws protocol Error naming the path for a non-file, more than kMaxExtentsPerFile extents,
// an empty extent, one out of order or overlapping the one before, or one past the size.
void decode_extents(ByteReader& r, ManifestEntry& e);

} // namespace sluice::wire
