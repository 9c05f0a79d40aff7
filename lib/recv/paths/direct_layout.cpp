#include "recv/paths/direct_layout.hpp"

#include <algorithm>

namespace sluice::direct_layout {

namespace {
uint64_t round_down(uint64_t x) { return x / kAlign * kAlign; }
uint64_t round_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
} // namespace

Chunk next_chunk(uint64_t offset, uint64_t end, size_t capacity) {
    Chunk c;
    c.offset = offset;
    c.skew = static_cast<size_t>(offset % kAlign);
    c.length = static_cast<size_t>(std::min<uint64_t>(capacity - c.skew, end - offset));
    return c;
}

Plan plan_chunk(const Chunk& c, uint64_t file_size) {
    const uint64_t s = c.offset, e = c.offset + c.length;
    auto run = [&](uint64_t from, uint64_t to) {
        return Run{from, c.skew + static_cast<size_t>(from - s), static_cast<size_t>(to - from)};
    };
    // The head ends at the first page boundary inside the chunk (or with the chunk).
    const uint64_t head_end = s % kAlign ? std::min(round_up(s), e) : s;
    // Whole pages end at the last page boundary, or at the end of the file, whose last page
    // holds no one else's bytes beyond it.
    const uint64_t direct_end = e == file_size ? e : std::max(head_end, round_down(e));
    Plan p;
    p.head = run(s, head_end);
    p.direct = run(head_end, direct_end);
    p.direct_padded = static_cast<size_t>(round_up(p.direct.length));
    p.tail = run(direct_end, e);
    return p;
}

} // namespace sluice::direct_layout
