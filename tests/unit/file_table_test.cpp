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

TEST_CASE("a block claimed twice, or after its file completed, is refused before the stream touches the entry") {
    FileTable t(10);
    RecvFile& one = t.append(file(0, 4097)); // arrives whole, in one block
    RecvFile& big = t.append(file(1, 3000));
    t.publish();
    // The whole file on a second stream while the first has it: refused, the first goes on.
    t.claim(one, 0, 4097);
    CHECK_THROWS_WITH(t.claim(one, 0, 4097), doctest::Contains("two streams at once"));
    CHECK_THROWS_WITH(t.claim(one, 0, 100), doctest::Contains("two streams at once"));
    // A checksum failure or a break gives the claim up: the copy asked for again is taken.
    t.disown(one, 0, 4097);
    t.claim(one, 0, 4097);
    CHECK(t.mark_verified(one, 0, 4097, {}, true));
    t.set_complete(one); // frees its names and verified ranges
    CHECK(one.verified.empty());
    // Not the freed ranges' word (they are empty now): the entry's.
    CHECK_THROWS_WITH(t.claim(one, 0, 4097), doctest::Contains("already complete"));
    // Blocks of a file in several streams at once are the ordinary case.
    t.claim(big, 0, 1000);
    t.claim(big, 1000, 1000);
    CHECK_THROWS_WITH(t.claim(big, 0, 3000), doctest::Contains("two streams at once"));
    CHECK_FALSE(t.mark_verified(big, 0, 1000, {}, true));
    CHECK_THROWS_WITH(t.claim(big, 500, 100), doctest::Contains("overlaps"));
    t.claim(big, 2000, 1000);
    CHECK_FALSE(t.mark_verified(big, 2000, 1000, {}, true));
    t.disown(big, 1000, 1000); // as if its checksum failed
    t.claim(big, 1000, 1000);  // the copy asked for again
    CHECK(t.mark_verified(big, 1000, 1000, {}, true));
    CHECK(big.receiving == 0);
    // Two copies of a part of a file in flight at once (not told apart until verified): the
    // one that would complete the file while the other is open is refused.
    RecvFile& two = t.append(file(2, 2000));
    t.publish();
    t.claim(two, 0, 1000);
    t.claim(two, 0, 1000); // the copy, on another stream
    t.claim(two, 1000, 1000);
    CHECK_FALSE(t.mark_verified(two, 0, 1000, {}, true));
    CHECK_THROWS_WITH(t.mark_verified(two, 1000, 1000, {}, true), doctest::Contains("still arriving on another stream"));
    CHECK_FALSE(two.complete);
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

namespace {

wire::ManifestEntry long_symlink(uint64_t id) {
    wire::ManifestEntry e;
    e.file_id = id;
    e.kind = wire::EntryKind::symlink;
    e.path = std::string(200, 'd') + "/" + std::to_string(id) + std::string(3800, 'n');
    e.link_target = std::string(4095, 't');
    return e;
}

} // namespace

TEST_CASE("the memory the table holds is counted per entry, names and targets included") {
    FileTable t(100, 1ull << 30);
    CHECK(t.bytes() == 0);
    RecvFile& a = t.append(file(0, 1));
    const uint64_t small = t.bytes();
    CHECK(small == FileTable::entry_bytes(a));
    CHECK(small >= sizeof(RecvFile));
    RecvFile& b = t.append(long_symlink(1));
    const uint64_t big = t.bytes() - small;
    CHECK(big == FileTable::entry_bytes(b));
    // The path (~4 KB), its parent, its name and the 4 KB target are each a heap block.
    CHECK(big >= sizeof(RecvFile) + b.entry.path.size() + b.entry.link_target.size() + b.parent.size() + b.name.size());
    CHECK(big <= sizeof(RecvFile) + 2 * (b.entry.path.size() + b.entry.link_target.size()) + 512);
}

TEST_CASE("a manifest past the memory limit is refused, naming the limit") {
    const uint64_t limit = 1 << 20;
    FileTable t(100'000, limit);
    uint64_t id = 0;
    std::string what;
    try {
        for (; id < 100'000; ++id) t.append(long_symlink(id));
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::protocol);
        what = e.what();
    }
    CHECK(what.find("--max-manifest-bytes " + std::to_string(limit)) != std::string::npos);
    CHECK(what.find("entry " + std::to_string(id)) != std::string::npos);
    // Refused at the first entry past the limit, not later.
    CHECK(id > 0);
    CHECK(id * FileTable::entry_bytes(t.at(0)) <= limit);
    CHECK((id + 1) * FileTable::entry_bytes(t.at(0)) > limit);
}

TEST_CASE("verified ranges and --verify checksums count against the same limit") {
    FileTable t(10, 64 << 10);
    RecvFile& f = t.append(file(0, 1'000'000));
    t.publish();
    const uint64_t entry = t.bytes();
    // One-byte blocks with gaps between them: the range list grows with each.
    std::string what;
    try {
        for (uint64_t off = 0; off < 1'000'000; off += 2) t.mark_verified(f, off, 1);
    } catch (const Error& e) {
        what = e.what();
    }
    CHECK(what.find("the verified ranges of entry 0") != std::string::npos);
    CHECK(f.verified.capacity() * sizeof f.verified[0] <= t.bytes() - entry);
    FileTable u(10, 64 << 10);
    RecvFile& g = u.append(file(0, 1'000'000));
    CHECK_THROWS_WITH(
        [&] {
            for (uint64_t off = 0; off < 1'000'000; ++off) u.record_checksum(g, off, 1, 0);
        }(),
        doctest::Contains("--max-manifest-bytes 65536"));
}

TEST_CASE("a path listed twice is refused") {
    FileTable t(10);
    t.append(file(0, 1));
    auto again = file(1, 1);
    again.path = "d/f0";
    CHECK_THROWS_WITH(t.append(std::move(again)), doctest::Contains("lists 'd/f0' twice"));
}

TEST_CASE("the default limit is a share of this host's memory, at least 256 MiB") {
    CHECK(FileTable::default_max_bytes() >= 256ull << 20);
    CHECK(FileTable(1).max_bytes() == FileTable::default_max_bytes());
}

TEST_CASE("a completed file gives back its names, ranges and checksums") {
    FileTable t(10, 1ull << 30);
    wire::ManifestEntry e = file(0, 3000);
    e.path = std::string(40, 'p') + "/" + std::string(40, 'n'); // heap-held parent, name and temp
    RecvFile& f = t.append(std::move(e));
    t.publish();
    CHECK_FALSE(t.mark_verified(f, 2000, 1000)); // a gap: the range list grows on the heap
    t.record_checksum(f, 2000, 1000, 7);
    const uint64_t held = t.bytes();
    CHECK(t.mark_verified(f, 0, 2000));
    t.set_complete(f);
    CHECK(t.is_complete(f));
    CHECK(f.parent.empty());
    CHECK(f.name.empty());
    CHECK(f.temp.empty());
    CHECK(f.verified.capacity() == 0);
    CHECK(f.sums.capacity() == 0);
    CHECK(f.entry.path.size() == 81); // the entry stays: messages and the end checks use it
    CHECK(f.verified_bytes == 3000);
    // What is left is counted as such: the slot and the path.
    CHECK(t.bytes() == FileTable::entry_bytes(f));
    CHECK(t.bytes() < held);
}

namespace {

// Appends n files of one byte from id `from`, completes those `done` says, publishes.
void append_files(FileTable& t, uint64_t from, uint64_t n) {
    for (uint64_t id = from; id < from + n; ++id) t.append(file(id, 1));
    t.publish();
}

void complete(FileTable& t, uint64_t from, uint64_t n) {
    for (uint64_t id = from; id < from + n; ++id) {
        RecvFile& f = t.at(id);
        REQUIRE(t.mark_verified(f, 0, 1));
        t.set_complete(f);
    }
}

} // namespace

TEST_CASE("complete slabs are released, and the entries held stay bounded (issue 19)") {
    FileTable t(1u << 20);
    t.allow_release(true);
    const uint64_t slab = 1024; // FileTable::kSlab
    // A window of 3 slabs' worth: announce, complete the oldest, release, many times over.
    append_files(t, 0, 3 * slab);
    for (uint64_t next = 3 * slab, oldest = 0; next < 40 * slab; next += slab, oldest += slab) {
        complete(t, oldest, slab);
        const uint64_t bytes_before = t.bytes();
        CHECK(t.release_settled() == slab);
        CHECK(t.bytes() < bytes_before);
        append_files(t, next, slab);
    }
    CHECK(t.size() == 40 * slab);
    CHECK(t.held() == 3 * slab);
    CHECK(t.held_peak() <= 4 * slab); // not 40 slabs' worth
    CHECK(t.released(0));
    CHECK(t.find(0) == nullptr);
    CHECK_FALSE(t.released(40 * slab - 1));
    // A released path may be named again by a later entry (a new file at that name).
    CHECK_NOTHROW(t.append(wire::ManifestEntry{.file_id = 40 * slab, .size = 1, .path = "d/f0"}));
}

TEST_CASE("a slab is kept while a stream's hold names one of its entries, or one is incomplete") {
    FileTable t(1u << 20);
    t.allow_release(true);
    const uint64_t slab = 1024;
    append_files(t, 0, 3 * slab);
    complete(t, 0, slab);
    complete(t, slab, slab - 1); // the second slab's last file is still open
    FileTable::Hold& h = t.hold(1);
    h.look(5); // a stream in the middle of file 5
    CHECK(t.release_settled() == 0);
    CHECK(t.find(5) == nullptr); // unpublished at once: a new lookup finds nothing
    CHECK_FALSE(t.released(5));  // but its memory stays, for the stream and for at()
    CHECK(t.at(5).entry.path == "d/f5");
    h.look(2 * slab); // moved on; file 5 still named until the switch is done
    CHECK(t.release_settled() == 0);
    h.settle();
    CHECK(t.release_settled() == slab);
    CHECK_FALSE(t.released(slab)); // its last file is incomplete
    complete(t, 2 * slab - 1, 1);
    CHECK(t.release_settled() == slab);
}

TEST_CASE("nothing is released unless allowed (a receive path without holds, --delete, metadata)") {
    FileTable t(1u << 20);
    append_files(t, 0, 2 * 1024);
    complete(t, 0, 1024);
    CHECK(t.release_settled() == 0);
    CHECK_FALSE(t.released(0));
    CHECK(t.held_peak() == 2 * 1024);
}

TEST_CASE("complete_below moves over whole published slabs once every file in them is complete") {
    FileTable t(10'000);
    std::vector<RecvFile*> files;
    for (uint64_t id = 0; id < 2'500; ++id) files.push_back(&t.append(file(id, 1)));
    CHECK(t.complete_below() == 0); // nothing published
    t.publish();
    CHECK(t.complete_below() == 0);
    for (uint64_t id = 1; id < 2'500; ++id) t.set_complete(*files[id]);
    CHECK(t.complete_below() == 0); // id 0 is not complete: nothing past it
    t.set_complete(*files[0]);
    CHECK(t.complete_below() == 2'048); // the partial third slab stays
    t.set_complete(*files[0]);          // a second completion counts once
    CHECK(t.complete_below() == 2'048);
}
