#include "recv/paths/allocate_ahead.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>

#include "core/io/sys_error.hpp"

namespace sluice {

namespace {
// How far the allocation of a file may run ahead of the bytes written to it (never more than
// the bytes written): large, because each step stalls the file's O_DIRECT writes (header).
constexpr uint64_t kAllocateAhead = uint64_t{1} << 30;
} // namespace

void allocate_ahead(RecvFile& f, int fd, uint64_t offset, uint64_t end, bool& refused) {
    const uint64_t written = f.direct_written.fetch_add(end - offset, std::memory_order_relaxed) + (end - offset);
    uint64_t front = f.allocated_to.load(std::memory_order_relaxed);
    // A sparse file is never allocated ahead: that would fill its holes (sparse_holes.hpp).
    if (end <= front || refused || f.entry.sparse) return;
    const uint64_t ahead = std::min(written, kAllocateAhead);
    const uint64_t target = std::min(f.entry.size, written + ahead);
    if (target < end || (target < f.entry.size && target - front < std::min(written, kAllocateAhead / 4))) return;
    while (front < target && !f.allocated_to.compare_exchange_weak(front, target, std::memory_order_relaxed)) {}
    if (front >= target) return; // another stream moved it
    if (::fallocate(fd, 0, static_cast<off_t>(front), static_cast<off_t>(target - front)) == 0) return;
    if (errno != EOPNOTSUPP) throw_errno(ErrorCode::destination, "cannot allocate '" + f.entry.path + "'");
    refused = true;
}

} // namespace sluice
