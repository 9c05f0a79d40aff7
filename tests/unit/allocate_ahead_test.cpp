// The direct path's allocation front (recv/paths/allocate_ahead.hpp): every fallocate stalls
// all O_DIRECT writes in flight on the file, so a large file's front moves in few steps, and
// never further ahead than the bytes already written (an abandoned file's bound).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>

#include "core/io/unique_fd.hpp"
#include "recv/paths/allocate_ahead.hpp"
#include "temp_dir.hpp"

using sluice::RecvFile;

TEST_CASE("a 1 GiB file written in order is allocated in at most 10 steps, never more than twice what was written") {
    constexpr uint64_t kMiB = uint64_t{1} << 20;
    constexpr uint64_t size = 1024 * kMiB;
    unit_test::TempDir dir;
    const std::string path = (dir.path / "f").string();
    sluice::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    REQUIRE(fd);
    RecvFile f;
    f.entry.size = size;
    f.entry.path = path;
    bool refused = false;
    int steps = 0;
    uint64_t front = 0;
    for (uint64_t at = 0; at < size; at += 2 * kMiB) {
        sluice::allocate_ahead(f, fd.get(), at, at + 2 * kMiB, refused);
        if (refused) break; // a file system without fallocate: nothing to count
        const uint64_t now = f.allocated_to.load();
        if (now != front) ++steps;
        front = now;
        CHECK(front >= at + 2 * kMiB);        // each write lands in allocated extents (an overwrite)
        CHECK(front <= 2 * (at + 2 * kMiB)); // at most as far ahead as has been written
    }
    if (refused) return;
    CHECK(front == size);
    // 64 MiB steps took 19 here (each a stall of every write in flight on the file).
    CHECK(steps <= 10);
    struct stat st = {};
    REQUIRE(::fstat(fd.get(), &st) == 0);
    CHECK(static_cast<uint64_t>(st.st_size) == size);
}
