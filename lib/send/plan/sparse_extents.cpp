#include "send/plan/sparse_extents.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/io/unique_fd.hpp"

namespace sluice {

void merge_extents(std::vector<wire::Extent>& x, size_t limit) {
    // Doubling the shortest hole kept: log2(largest hole) passes at most, each linear.
    for (uint64_t gap = 4096; x.size() > limit; gap *= 2) {
        size_t out = 0;
        for (size_t i = 1; i < x.size(); ++i) {
            wire::Extent& last = x[out];
            if (x[i].offset - (last.offset + last.length) <= gap) {
                last.length = x[i].offset + x[i].length - last.offset;
            } else {
                x[++out] = x[i];
            }
        }
        x.resize(out + 1);
    }
}

SparseLayout find_data_extents(const std::string& path, uint64_t size, uint64_t allocated) {
    SparseLayout l;
    // Most files stop here: an update of a tree of unchanged files opens none of them.
    if (size == 0 || (allocated != kUnknownAllocation && allocated >= size)) return l;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return l;
    // Allocation at least the size: no hole (most files stop here).
    if (static_cast<uint64_t>(st.st_blocks) * 512 >= size) return l;
    uint64_t off = 0;
    while (off < size) {
        off_t d = ::lseek(fd.get(), static_cast<off_t>(off), SEEK_DATA);
        if (d < 0) {
            if (errno == ENXIO) break; // nothing but hole from off to the end
            return {};                 // no SEEK_DATA here: sent whole
        }
        if (static_cast<uint64_t>(d) >= size) break;
        off_t h = ::lseek(fd.get(), d, SEEK_HOLE);
        uint64_t end = h < 0 ? size : std::min<uint64_t>(static_cast<uint64_t>(h), size);
        if (end <= static_cast<uint64_t>(d)) return {};
        l.extents.push_back({static_cast<uint64_t>(d), end - static_cast<uint64_t>(d)});
        off = end;
    }
    merge_extents(l.extents, wire::kMaxExtentsPerFile);
    uint64_t data = 0;
    for (auto& e : l.extents) data += e.length;
    if (data == size) return {};
    l.sparse = true;
    l.hole_bytes = size - data;
    return l;
}

} // namespace sluice
