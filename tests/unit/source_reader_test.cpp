// The sender's block checksum is computed through mappings of at most kWindow bytes; it must
// equal the XXH3 of the whole block for every length and offset around the window size.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "send/paths/source_reader.hpp"
#include "core/checksum/xxh3.hpp"

TEST_CASE("SourceReader checksums equal XXH3 of the whole block across mapping windows") {
    const uint64_t w = sluice::SourceReader::kWindow;
    std::vector<unsigned char> data(3 * w + 12345);
    std::mt19937_64 rng(11);
    for (auto& b : data) b = static_cast<unsigned char>(rng());
    char name[] = "/tmp/sluice-source-reader-XXXXXX";
    int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    struct stat st {};
    REQUIRE(::fstat(fd, &st) == 0);
    ::close(fd);

    sluice::SourceFile f;
    f.size = data.size();
    f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    f.path = name;
    f.rel = "data";
    sluice::SourceReader reader;
    for (uint64_t off : {uint64_t{0}, uint64_t{4096}, uint64_t{777}, w - 1})
        for (uint64_t len : {uint64_t{1}, w - 1, w, w + 1, 2 * w + 4096, data.size() - off}) {
            if (off + len > data.size()) continue;
            CAPTURE(off);
            CAPTURE(len);
            CHECK(reader.checksum(f, off, len) == sluice::xxh3_64(data.data() + off, len));
        }
    CHECK_FALSE(reader.used_read_fallback());
    ::unlink(name);
}
