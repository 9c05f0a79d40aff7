// SumsCache (recv/store/sums_cache.hpp): an entry is returned only for the very inode, size,
// mtime, ctime and block size it was stored for, intact, from a directory only we can write;
// a file's sums are kept only when they are one per whole block.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "recv/store/sums_cache.hpp"
#include "temp_dir.hpp"

using namespace sluice;

namespace {

constexpr uint64_t kBlock = 4096, kBlocks = SumsCache::kMinBlocks + 4;

std::vector<uint64_t> some_sums() {
    std::vector<uint64_t> s;
    for (uint64_t i = 0; i < kBlocks; ++i) s.push_back(0x9e3779b97f4a7c15ull * (i + 1));
    return s;
}

void write_file(const std::string& p, uint64_t size) {
    std::ofstream(p, std::ios::binary) << std::string(size, 'a');
}

struct stat stat_of(const std::string& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st;
}

void put_entry(const std::string& dir, const struct stat& st, const std::vector<unsigned char>& bytes) {
    std::ofstream(dir + "/" + SumsCache::entry_name(st.st_dev, st.st_ino), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

} // namespace

TEST_CASE("an entry is used only while the file is the one it was stored for") {
    unit_test::TempDir tmp;
    const std::string cache_dir = (tmp.path / "cache").string(), file = (tmp.path / "f").string();
    REQUIRE(::mkdir(cache_dir.c_str(), 0700) == 0);
    write_file(file, kBlocks * kBlock);
    SumsCache cache(cache_dir);
    struct stat st = stat_of(file);
    CHECK_FALSE(cache.load(st, kBlock)); // nothing stored yet
    put_entry(cache_dir, st, SumsCache::encode(st, kBlock, some_sums()));
    auto got = cache.load(st, kBlock);
    REQUIRE(got);
    CHECK(*got == some_sums());
    CHECK_FALSE(cache.load(st, kBlock * 2)); // another block size

    SUBCASE("a change of ctime alone (chmod) retires it") {
        REQUIRE(::chmod(file.c_str(), 0600) == 0);
        CHECK_FALSE(cache.load(stat_of(file), kBlock));
    }
    SUBCASE("a write retires it, whatever mtime is set back to") {
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        { std::ofstream(file, std::ios::binary | std::ios::in) << 'b'; }
        REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
        const struct stat now = stat_of(file);
        CHECK(now.st_mtim.tv_nsec == st.st_mtim.tv_nsec);
        CHECK_FALSE(cache.load(now, kBlock));
    }
    SUBCASE("a damaged byte anywhere makes it unusable") {
        std::vector<unsigned char> b = SumsCache::encode(st, kBlock, some_sums());
        for (size_t at : {size_t{0}, size_t{20}, size_t{64 + 8 * 3}, b.size() - 1}) {
            std::vector<unsigned char> bad = b;
            bad[at] ^= 0x40;
            put_entry(cache_dir, st, bad);
            CHECK_FALSE(cache.load(st, kBlock));
        }
        b.pop_back();
        put_entry(cache_dir, st, b);
        CHECK_FALSE(cache.load(st, kBlock));
    }
    SUBCASE("a directory others may write to is not trusted") {
        REQUIRE(::chmod(cache_dir.c_str(), 0777) == 0);
        CHECK_FALSE(cache.load(st, kBlock));
    }
    SUBCASE("a file of fewer blocks than kMinBlocks is not looked up") {
        write_file(file, (SumsCache::kMinBlocks - 1) * kBlock);
        const struct stat small = stat_of(file);
        std::vector<uint64_t> s(SumsCache::kMinBlocks - 1, 7);
        put_entry(cache_dir, small, SumsCache::encode(small, kBlock, s));
        CHECK_FALSE(cache.load(small, kBlock));
    }
}

TEST_CASE("a completed file's sums are stored only when they are one per whole block") {
    unit_test::TempDir tmp;
    const std::string cache_dir = (tmp.path / "c" / "sums").string(), file = (tmp.path / "f").string();
    const uint64_t size = kBlocks * kBlock - 100; // a short last block
    write_file(file, size);
    DestTree tree(tmp.path);
    SumsCache cache(cache_dir);
    cache.set_block_size(kBlock);
    REQUIRE(cache.wants(size));
    CHECK_FALSE(cache.wants(kBlock * (SumsCache::kMinBlocks - 1)));
    RecvFile f;
    f.entry.size = size;
    f.entry.mtime_ns = static_cast<int64_t>(stat_of(file).st_mtim.tv_sec) * 1'000'000'000 + stat_of(file).st_mtim.tv_nsec;
    f.name = "f";
    const std::vector<uint64_t> sums = some_sums();
    for (uint64_t i = 0; i < kBlocks; ++i) f.sums.push_back({i * kBlock, std::min(kBlock, size - i * kBlock), sums[i]});
    std::string note;

    SUBCASE("whole blocks: stored (the directory made 0700), then loaded") {
        cache.keep(f);
        CHECK(cache.flush(tree, {}, note) == 1);
        CHECK(note.empty());
        CHECK((stat_of(cache_dir).st_mode & 0777) == 0700);
        auto got = cache.load(stat_of(file), kBlock);
        REQUIRE(got);
        CHECK(*got == sums);
    }
    SUBCASE("a block missing, split or repeated: nothing stored") {
        RecvFile g;
        g.entry = f.entry;
        g.name = f.name;
        g.sums.assign(f.sums.begin(), f.sums.end() - 1);
        cache.keep(g);
        g.sums = f.sums;
        g.sums[2] = {2 * kBlock, kBlock / 2, 1};
        g.sums.push_back({2 * kBlock + kBlock / 2, kBlock / 2, 2});
        cache.keep(g);
        g.sums = f.sums;
        g.sums.push_back(f.sums[0]);
        cache.keep(g);
        CHECK(cache.flush(tree, {}, note) == 0);
    }
    SUBCASE("a file changed before the end of the transfer: nothing stored") {
        cache.keep(f);
        write_file(file, size + 1);
        CHECK(cache.flush(tree, {}, note) == 0);
    }
}
