#include "send/plan/update_plan.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "core/checksum/xxh3.hpp"
#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"

namespace sluice {

std::vector<wire::Extent> unchanged_ranges(const SourceFile& f, const wire::BlockSums& s, uint64_t block_size,
                                           std::vector<unsigned char>& buf) {
    const uint64_t blocks = (s.old_size + block_size - 1) / block_size;
    if (s.sums.size() != blocks)
        throw Error(ErrorCode::protocol, "BLOCK_SUMS for '" + f.rel + "' lists " + std::to_string(s.sums.size()) +
                                             " blocks, its old size of " + std::to_string(s.old_size) + " bytes has " +
                                             std::to_string(blocks));
    std::vector<wire::Extent> same;
    if (blocks == 0 || f.size == 0) return same;
    UniqueFd fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | (f.is_operand() ? 0 : O_NOFOLLOW)));
    if (!fd) throw_errno(ErrorCode::source, "cannot open '" + f.path + "'");
    if (buf.empty()) buf.resize(kHashReadBytes);
    Xxh3 h;
    for (uint64_t i = 0; i < blocks; ++i) {
        const uint64_t off = i * block_size;
        const uint64_t old_len = std::min(block_size, s.old_size - off);
        // Only a block of the same length in both versions can be the same block.
        if (off >= f.size || std::min(block_size, f.size - off) != old_len) break;
        h.reset();
        for (uint64_t done = 0; done < old_len;) {
            size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), old_len - done));
            ssize_t n = ::pread(fd.get(), buf.data(), want, static_cast<off_t>(f.file_offset(off + done)));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw_errno(ErrorCode::source, "cannot read '" + f.path + "'");
            if (n == 0)
                throw Error(ErrorCode::source, "'" + f.path + "' became shorter while it was being sent (" +
                                                   std::to_string(off + done) + " of " + std::to_string(f.size) + " bytes)");
            h.update(buf.data(), static_cast<size_t>(n));
            done += static_cast<uint64_t>(n);
        }
        if (h.digest() != s.sums[i]) continue;
        if (!same.empty() && same.back().offset + same.back().length == off) {
            same.back().length += old_len;
        } else {
            same.push_back({off, old_len});
        }
    }
    return same;
}

} // namespace sluice
