#include <doctest/doctest.h>

#include "recv/store/file_table.hpp"

using namespace sluice;

namespace {

wire::ManifestEntry file(uint64_t id, uint64_t size) {
    wire::ManifestEntry e;
    e.file_id = id;
    e.size = size;
    e.path = "d/f" + std::to_string(id);
    return e;
}

} // namespace

TEST_CASE("a file completes exactly once, whatever the block order") {
    FileTable t(100);
    RecvFile& f = t.append(file(0, 300));
    t.publish();
    CHECK(t.find(0) == &f);
    CHECK(t.find(1) == nullptr);
    CHECK_FALSE(t.mark_verified(f, 200, 100));
    CHECK_FALSE(t.mark_verified(f, 0, 100));
    CHECK(t.mark_verified(f, 100, 100));
    CHECK(f.verified.size() == 1); // merged into one range
    CHECK(f.name == "f0");
    CHECK(f.parent == "d");
}

TEST_CASE("overlapping or repeated blocks are protocol errors") {
    FileTable t(10);
    RecvFile& f = t.append(file(0, 1000));
    t.publish();
    t.mark_verified(f, 100, 100);
    CHECK_THROWS_WITH(t.mark_verified(f, 100, 100), doctest::Contains("overlaps"));
    CHECK_THROWS(t.mark_verified(f, 150, 10));
    CHECK_THROWS(t.mark_verified(f, 50, 60));
    CHECK_NOTHROW(t.mark_verified(f, 0, 100));
}

TEST_CASE("ids must be dense and within the receiver's cap") {
    FileTable t(2);
    CHECK_THROWS_WITH(t.append(file(1, 1)), doctest::Contains("expected 0"));
    t.append(file(0, 1));
    t.append(file(1, 1));
    CHECK_THROWS_WITH(t.append(file(2, 1)), doctest::Contains("limit"));
}

TEST_CASE("temporary names are fixed per path and stay short") {
    FileTable t(10);
    RecvFile& a = t.append(file(0, 1));
    CHECK(a.temp.rfind(".sluice-part.", 0) == 0);
    CHECK(a.temp.size() == 13 + 16);
}
