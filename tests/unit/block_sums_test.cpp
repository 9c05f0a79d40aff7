// Block sums through mappings (core/checksum/block_sums.hpp): the same values as hashing each
// block from a buffer, on one thread or several, from an offset that is not page aligned; a
// file shorter than the range asked for is reported, not a crash (SIGBUS caught).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <vector>

#include "core/checksum/block_sums.hpp"
#include "core/checksum/xxh3.hpp"
#include "core/io/unique_fd.hpp"
#include "temp_dir.hpp"

using sluice::BlockSumsResult;
using unit_test::TempDir;

namespace {

std::vector<unsigned char> write_random(const std::string& path, size_t n) {
    std::mt19937_64 rng(11);
    std::vector<unsigned char> data(n);
    for (auto& b : data) b = static_cast<unsigned char>(rng());
    sluice::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    REQUIRE(fd);
    REQUIRE(::write(fd.get(), data.data(), n) == static_cast<ssize_t>(n));
    return data;
}

} // namespace

TEST_CASE("mapped block sums equal each block's XXH3, on any number of threads") {
    TempDir dir;
    const std::string path = (dir.path / "f").string();
    const auto data = write_random(path, (5 << 20) + 12345);
    sluice::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    const uint64_t base = 1000, length = data.size() - base, block = 1 << 20; // base not page aligned
    std::vector<uint64_t> want;
    for (uint64_t off = 0; off < length; off += block)
        want.push_back(sluice::xxh3_64(data.data() + base + off, std::min(block, length - off)));
    for (unsigned threads : {1u, 2u, 3u, 8u}) {
        std::atomic<int> calls{0};
        BlockSumsResult r = sluice::block_sums_mapped(fd.get(), base, length, block, threads, [&] { ++calls; });
        REQUIRE(r.status == BlockSumsResult::Status::hashed);
        CHECK(r.sums == want);
        CHECK(calls.load() == static_cast<int>(want.size()));
    }
    BlockSumsResult p = sluice::block_sums_pread(fd.get(), base, length, block, nullptr);
    REQUIRE(p.status == BlockSumsResult::Status::hashed);
    CHECK(p.sums == want);
    for (unsigned threads : {2u, 3u, 8u}) {
        std::atomic<int> calls{0};
        BlockSumsResult r = sluice::block_sums_read(fd.get(), base, length, block, threads, [&] { ++calls; });
        REQUIRE(r.status == BlockSumsResult::Status::hashed);
        CHECK(r.sums == want);
        CHECK(calls.load() == static_cast<int>(want.size()));
    }
    bool refused = false;
    BlockSumsResult either = sluice::block_sums(fd.get(), base, length, block, 2, nullptr, refused);
    CHECK(either.sums == want);
    CHECK_FALSE(refused);
    CHECK(sluice::block_sums_mapped(fd.get(), 0, 0, block, 2, nullptr).sums.empty());
}

TEST_CASE("files on tmpfs are hashed through pread, others through mappings") {
    // /dev/shm is tmpfs on Linux; its 4 KiB pages made mappings 4-5x slower than pread.
    sluice::UniqueFd shm(::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (shm) CHECK(sluice::hash_read_for(shm.get()) == sluice::HashRead::read);
    TempDir dir;
    sluice::UniqueFd d(::open(dir.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(d);
    struct statfs s {};
    REQUIRE(::fstatfs(d.get(), &s) == 0);
    if (s.f_type != TMPFS_MAGIC) CHECK(sluice::hash_read_for(d.get()) == sluice::HashRead::mapped);
}

TEST_CASE("a file shorter than the range hashed is reported as shrank, through a mapping and through pread") {
    TempDir dir;
    const std::string path = (dir.path / "f").string();
    write_random(path, 1 << 20);
    sluice::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    // Pages past the end of the file raise SIGBUS when read through the mapping.
    for (unsigned threads : {1u, 2u}) {
        BlockSumsResult r = sluice::block_sums_mapped(fd.get(), 0, 4 << 20, 1 << 20, threads, nullptr);
        CHECK(r.status == BlockSumsResult::Status::shrank);
        CHECK(r.sums.empty());
    }
    CHECK(sluice::block_sums_pread(fd.get(), 0, 4 << 20, 1 << 20, nullptr).status == BlockSumsResult::Status::shrank);
    CHECK(sluice::block_sums_read(fd.get(), 0, 4 << 20, 1 << 20, 2, nullptr).status == BlockSumsResult::Status::shrank);
    // The process goes on hashing after it: the guard is per call.
    BlockSumsResult ok = sluice::block_sums_mapped(fd.get(), 0, 1 << 20, 1 << 20, 1, nullptr);
    CHECK(ok.status == BlockSumsResult::Status::hashed);
}
