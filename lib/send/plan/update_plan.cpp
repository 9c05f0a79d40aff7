#include "send/plan/update_plan.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "core/checksum/block_sums.hpp"
#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"

namespace sluice {

std::vector<wire::Extent> unchanged_ranges(const SourceFile& f, const wire::BlockSums& s, uint64_t block_size,
                                           bool& mapped_refused) {
    const uint64_t blocks = (s.old_size + block_size - 1) / block_size;
    if (s.sums.size() != blocks)
        throw Error(ErrorCode::protocol, "BLOCK_SUMS for '" + f.rel + "' lists " + std::to_string(s.sums.size()) +
                                             " blocks, its old size of " + std::to_string(s.old_size) + " bytes has " +
                                             std::to_string(blocks));
    std::vector<wire::Extent> same;
    if (blocks == 0 || f.size == 0) return same;
    // Only a block of the same length in both versions can be the same block: the leading
    // blocks up to the first that differs in length (the shorter version's end) are compared.
    uint64_t comparable = 0, compared_bytes = 0;
    for (; comparable < blocks; ++comparable) {
        const uint64_t off = comparable * block_size;
        const uint64_t old_len = std::min(block_size, s.old_size - off);
        if (off >= f.size || std::min(block_size, f.size - off) != old_len) break;
        compared_bytes = off + old_len;
    }
    if (comparable == 0) return same;
    UniqueFd fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | (f.is_operand() ? 0 : O_NOFOLLOW)));
    if (!fd) throw_errno(ErrorCode::source, "cannot open '" + f.path + "'");
    BlockSumsResult mine = block_sums(fd.get(), f.file_offset(0), compared_bytes, block_size, hash_threads_for(comparable),
                                      nullptr, mapped_refused);
    if (mine.status == BlockSumsResult::Status::unreadable) throw_errno(ErrorCode::source, "cannot read '" + f.path + "'", mine.error);
    if (mine.status == BlockSumsResult::Status::shrank)
        throw Error(ErrorCode::source, "'" + f.path + "' became shorter while it was being sent (" + std::to_string(f.size) +
                                           " bytes listed)");
    for (uint64_t i = 0; i < comparable; ++i) {
        if (mine.sums[i] != s.sums[i]) continue;
        const uint64_t off = i * block_size, len = std::min(block_size, s.old_size - off);
        if (!same.empty() && same.back().offset + same.back().length == off) {
            same.back().length += len;
        } else {
            same.push_back({off, len});
        }
    }
    return same;
}

} // namespace sluice
