#include "recv/store/sparse_holes.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace sluice {

Holes mark_holes(FileTable& files, RecvFile& f) {
    // The holes: the gaps between extents (sorted and disjoint: checked on decode).
    std::vector<std::pair<uint64_t, uint64_t>> holes;
    uint64_t at = 0;
    for (const wire::Extent& x : f.entry.data_extents) {
        if (x.offset > at) holes.emplace_back(at, x.offset);
        at = x.offset + x.length;
    }
    if (f.entry.size > at) holes.emplace_back(at, f.entry.size);
    // A resumed file's verified ranges are data blocks: they should lie in extents, but a
    // source changed in place could move them; a hole is marked only where nothing is yet.
    const std::vector<std::pair<uint64_t, uint64_t>> have = f.verified;
    Holes h;
    for (auto [b, e] : holes) {
        auto it = std::lower_bound(have.begin(), have.end(), std::make_pair(b, uint64_t{0}));
        if (it != have.begin() && std::prev(it)->second > b) --it;
        for (; b < e; ++it) {
            const uint64_t stop = it == have.end() ? e : std::min(e, it->first);
            if (stop > b) {
                h.complete = files.mark_verified(f, b, stop - b);
                h.bytes += stop - b;
            }
            if (it == have.end()) break;
            b = std::max(b, it->second);
        }
    }
    if (holes.empty()) h.complete = f.verified_bytes == f.entry.size;
    return h;
}

void check_inside_data(const RecvFile& f, uint64_t offset, uint64_t len) {
    if (!f.entry.sparse) return;
    const auto& x = f.entry.data_extents;
    // The last extent starting at or before offset.
    auto it = std::upper_bound(x.begin(), x.end(), offset, [](uint64_t o, const wire::Extent& e) { return o < e.offset; });
    if (it != x.begin()) {
        const wire::Extent& e = *std::prev(it);
        if (offset + len <= e.offset + e.length) return;
    }
    throw Error(ErrorCode::protocol, "BLOCK [" + std::to_string(offset) + ", +" + std::to_string(len) + ") of sparse file '" +
                                         f.entry.path + "' lies in a hole its manifest entry declared");
}

} // namespace sluice
