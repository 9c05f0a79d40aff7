// The get rings' registry of checksum-pool reads in flight (issue 15, h15j): a ring that found
// a block in the page cache (cachestat counts pages still being read) seals it itself only
// when no pool read of the same file overlaps it; ranges of other files or beside it do not
// count, and a finished read is forgotten (one of two equal ones at a time).
#include <doctest/doctest.h>

#include "serve/get/sum_pool.hpp"

using namespace sluice::serve;

TEST_CASE("a pool read in flight overlaps what it covers of its own file only") {
    ReadsInFlight r;
    const FileKey a{1, 10}, b{1, 11}, c{2, 10};
    CHECK_FALSE(r.overlaps(a, 0, 1 << 20)); // nothing read
    r.add(a, 4 << 20, 1 << 20);
    CHECK(r.overlaps(a, 4 << 20, 1 << 20));
    CHECK(r.overlaps(a, (5 << 20) - 1, 1 << 20)); // its last byte
    CHECK(r.overlaps(a, 0, (4 << 20) + 1));       // its first byte
    CHECK_FALSE(r.overlaps(a, 5 << 20, 1 << 20)); // just after it
    CHECK_FALSE(r.overlaps(a, 3 << 20, 1 << 20)); // just before it
    CHECK_FALSE(r.overlaps(b, 4 << 20, 1 << 20)); // another inode
    CHECK_FALSE(r.overlaps(c, 4 << 20, 1 << 20)); // another device
}

TEST_CASE("a finished read is forgotten, one of two equal ones at a time") {
    ReadsInFlight r;
    const FileKey a{1, 10};
    r.add(a, 0, 1 << 20);
    r.add(a, 0, 1 << 20); // two sessions' streams read the same block
    r.add(a, 1 << 20, 1 << 20);
    CHECK(r.size() == 3);
    r.remove(a, 0, 1 << 20);
    CHECK(r.overlaps(a, 0, 1)); // the other one still reads it
    r.remove(a, 0, 1 << 20);
    CHECK_FALSE(r.overlaps(a, 0, 1 << 20));
    CHECK(r.overlaps(a, 1 << 20, 1));
    r.remove(a, 5 << 20, 1 << 20); // never added: nothing else goes
    CHECK(r.size() == 1);
}
