#pragma once
// Changed-block updates, the sender's half (docs/protocol.md, "Updates by changed blocks"):
// the receiver listed the XXH3 of each block of its old version of a file (BLOCK_SUMS); the
// sender hashes the same blocks of its own version and keeps back those that match.
#include <cstdint>
#include <vector>

#include "core/wire/protocol.hpp"
#include "send/plan/source_tree.hpp"

namespace sluice {

// The ranges of f that equal the receiver's old version, merged (sorted, disjoint). Hashes f
// through mappings on several threads (core/checksum/block_sums.hpp); a file that cannot be
// mapped is read through pread instead and mapped_refused set (said in the stats). Throws
// protocol Error naming the file when the sums do not fit the old size and block size,
// source Error when f cannot be read (a file shortened since it was listed).
std::vector<wire::Extent> unchanged_ranges(const SourceFile& f, const wire::BlockSums& s, uint64_t block_size,
                                           bool& mapped_refused);

} // namespace sluice
