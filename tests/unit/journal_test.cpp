// The resume journal (recv/store/journal.hpp): what load() returns is trusted to skip data, so
// it must return only blocks recorded for this version of the file (size and mtime) whose data
// is still there, and nothing from a journal that is truncated, corrupted, of another format
// or reached through a symlink; a damaged record ends what is trusted.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "recv/store/journal.hpp"
#include "sluice/error.hpp"
#include "temp_dir.hpp"

using namespace sluice;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSize = 1 << 20;
constexpr int64_t kMtime = 1'700'000'000'123'456'789;
constexpr size_t kHeaderBytes = 24, kRecordBytes = 32; // the format in journal.hpp

// A directory holding the partial file "t" (kSize bytes, as the receiver allocates it).
struct Fixture {
    unit_test::TempDir tmp;
    UniqueFd dir = tmp.open();
    std::string temp = "t";
    fs::path journal = tmp.path / journal::name_for(temp);
    Fixture() { resize_data(kSize); }
    void resize_data(uint64_t n) const { fs::resize_file(write_empty(tmp.path / temp), n); }
    static fs::path write_empty(const fs::path& p) {
        std::ofstream(p, std::ios::app).close();
        return p;
    }
    journal::Contents load(uint64_t size = kSize, int64_t mtime = kMtime) const {
        return journal::load(dir.get(), temp, size, mtime);
    }
    // Three blocks: [0, 4096), [8192, 12288), [4096, 8192).
    void record_three() const {
        journal::create(dir.get(), temp, kSize, kMtime);
        journal::append(dir.get(), temp, kSize, kMtime, 0, 4096, 0x1111);
        journal::append(dir.get(), temp, kSize, kMtime, 8192, 4096, 0x2222);
        journal::append(dir.get(), temp, kSize, kMtime, 4096, 4096, 0x3333);
    }
    std::vector<char> bytes() const {
        std::ifstream in(journal, std::ios::binary);
        return {std::istreambuf_iterator<char>(in), {}};
    }
    void rewrite(const std::vector<char>& b) const {
        std::ofstream(journal, std::ios::binary | std::ios::trunc).write(b.data(), b.size());
    }
};

} // namespace

TEST_CASE("journal: saved blocks load back in order, merged into ranges") {
    Fixture t;
    t.record_three();
    journal::Contents c = t.load();
    CHECK(c.present);
    REQUIRE(c.blocks.size() == 3);
    CHECK(c.blocks[0].offset == 0);
    CHECK(c.blocks[0].length == 4096);
    CHECK(c.blocks[0].checksum == 0x1111);
    CHECK(c.blocks[1].offset == 8192);
    CHECK(c.blocks[1].checksum == 0x2222);
    CHECK(c.blocks[2].offset == 4096);
    CHECK(c.blocks[2].checksum == 0x3333);
    CHECK(c.ranges == journal::Ranges{{0, 12288}});
    CHECK(t.bytes().size() == kHeaderBytes + 3 * kRecordBytes);
}

TEST_CASE("journal: a block received twice is listed twice and its ranges collapse") {
    Fixture t;
    journal::create(t.dir.get(), t.temp, kSize, kMtime);
    journal::append(t.dir.get(), t.temp, kSize, kMtime, 0, 100, 1);
    journal::append(t.dir.get(), t.temp, kSize, kMtime, 0, 100, 1);
    journal::append(t.dir.get(), t.temp, kSize, kMtime, 50, 100, 2);
    journal::append(t.dir.get(), t.temp, kSize, kMtime, 500, 10, 3);
    journal::Contents c = t.load();
    CHECK(c.blocks.size() == 4);
    CHECK(c.ranges == journal::Ranges{{0, 150}, {500, 510}});
}

TEST_CASE("journal: one of another file version (size or mtime) is ignored") {
    Fixture t;
    t.record_three();
    CHECK(t.load(kSize + 1, kMtime).blocks.empty());
    CHECK(t.load(kSize, kMtime + 1).blocks.empty());
    CHECK(t.load(kSize, kMtime + 1).ranges.empty());
    CHECK(t.load().blocks.size() == 3); // and it is still there for the right version
}

TEST_CASE("journal: records are bound to the version in the header") {
    // A header rewritten to another size keeps records checked against the old one: none is trusted.
    Fixture t;
    t.record_three();
    std::vector<char> b = t.bytes();
    b[8] ^= 1; // size, u64 little-endian at offset 8
    t.rewrite(b);
    CHECK(t.load(kSize ^ 1, kMtime).blocks.empty());
}

TEST_CASE("journal: a truncated journal keeps only its whole records") {
    Fixture t;
    t.record_three();
    std::vector<char> b = t.bytes();
    fs::resize_file(t.journal, b.size() - 5); // a torn last record
    CHECK(t.load().blocks.size() == 2);
    fs::resize_file(t.journal, kHeaderBytes + 3); // a torn first record
    CHECK(t.load().blocks.empty());
    fs::resize_file(t.journal, kHeaderBytes - 1); // not even a header
    CHECK(t.load().blocks.empty());
    fs::resize_file(t.journal, 0);
    CHECK(t.load().blocks.empty());
}

TEST_CASE("journal: a corrupted record and every record after it are not trusted") {
    for (size_t field = 0; field < kRecordBytes; field += 8) { // offset, length, checksum, check
        CAPTURE(field);
        Fixture t;
        t.record_three();
        std::vector<char> b = t.bytes();
        b[kHeaderBytes + kRecordBytes + field + 1] ^= 0x40; // the second record
        t.rewrite(b);
        journal::Contents c = t.load();
        REQUIRE(c.blocks.size() == 1);
        CHECK(c.blocks[0].offset == 0);
        CHECK(c.ranges == journal::Ranges{{0, 4096}});
    }
}

TEST_CASE("journal: one of another format is not trusted") {
    Fixture t;
    t.record_three();
    std::vector<char> b = t.bytes();
    b[3] = '1'; // "SLJ1"
    t.rewrite(b);
    CHECK(t.load().blocks.empty());
    CHECK(t.load().present); // there, not trusted: the receiver removes it
}

TEST_CASE("journal: blocks whose data is not there are not trusted") {
    Fixture t;
    t.record_three();
    t.resize_data(8192);                // the partial file is shorter than the block at 8192 claims
    CHECK(t.load().blocks.size() == 1); // [0, 4096); the record after the short one is dropped too
    fs::remove(t.tmp.path / t.temp);
    CHECK(t.load().blocks.empty());
}

TEST_CASE("journal: records outside the file or empty are not trusted") {
    Fixture t;
    journal::create(t.dir.get(), t.temp, kSize, kMtime);
    journal::append(t.dir.get(), t.temp, kSize, kMtime, kSize - 10, 11, 1);
    CHECK(t.load().blocks.empty());
    journal::create(t.dir.get(), t.temp, kSize, kMtime);
    journal::append(t.dir.get(), t.temp, kSize, kMtime, 10, 0, 1);
    CHECK(t.load().blocks.empty());
}

TEST_CASE("journal: a symlink, a directory or an oversized file under its name is not read") {
    Fixture t;
    t.record_three();
    fs::rename(t.journal, t.tmp.path / "elsewhere");
    fs::create_symlink("elsewhere", t.journal);
    CHECK(t.load().blocks.empty());
    CHECK(t.load().present); // not opened (O_NOFOLLOW), but there: removed, not left
    // create() does not write through the symlink either.
    CHECK_THROWS_AS(journal::create(t.dir.get(), t.temp, kSize, kMtime), Error);
    CHECK(fs::file_size(t.tmp.path / "elsewhere") == kHeaderBytes + 3 * kRecordBytes);
    fs::remove(t.journal);
    fs::create_directory(t.journal);
    CHECK(t.load().blocks.empty());
    CHECK(t.load().present);
    fs::remove(t.journal);
    fs::rename(t.tmp.path / "elsewhere", t.journal);
    fs::resize_file(t.journal, (64u << 20) + 1); // sparse: past the 64 MiB bound
    CHECK(t.load().blocks.empty());
}

TEST_CASE("journal: create starts over, remove deletes, and errors name the journal") {
    Fixture t;
    t.record_three();
    journal::create(t.dir.get(), t.temp, kSize, kMtime);
    CHECK(t.load().blocks.empty());
    CHECK(fs::file_size(t.journal) == kHeaderBytes);

    journal::remove(t.dir.get(), t.temp);
    CHECK_FALSE(fs::exists(t.journal));
    CHECK(t.load().blocks.empty());
    CHECK_FALSE(t.load().present); // nothing there: the receiver has nothing to remove
    CHECK_NOTHROW(journal::remove(t.dir.get(), t.temp)); // already gone: nothing to do
    CHECK(fs::exists(t.tmp.path / t.temp));              // the data file is not touched

    try {
        journal::append(t.dir.get(), t.temp, kSize, kMtime, 0, 1, 1); // no journal to append to
        FAIL("append without a journal did not throw");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::destination);
        CHECK(std::string(e.what()).find("'" + journal::name_for(t.temp) + "'") != std::string::npos);
    }
    CHECK(journal::name_for("x") == "x.j");
}
