// The sender's block checksum is read with pread through one buffer of kBufferBytes; it must
// equal the XXH3 of the whole block for every length and offset around the buffer size, and
// a block reaching past the end of its file (the file shrank) is an error naming the file,
// never a signal (a mapping read past end of file raised SIGBUS).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/io/file_times.hpp"
#include "send/paths/source_reader.hpp"
#include "core/checksum/xxh3.hpp"
#include "sluice/error.hpp"

namespace {

struct TempSource {
    char name[64] = "/tmp/sluice-source-reader-XXXXXX";
    std::vector<unsigned char> data;
    sluice::SourceFile f;
    explicit TempSource(size_t size) : data(size) {
        std::mt19937_64 rng(11);
        for (auto& b : data) b = static_cast<unsigned char>(rng());
        int fd = ::mkstemp(name);
        REQUIRE(fd >= 0);
        REQUIRE(::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
        struct stat st = {};
        REQUIRE(::fstat(fd, &st) == 0);
        ::close(fd);
        f.size = data.size();
        f.mtime_ns = sluice::ns_of(st.st_mtim);
        f.path = name;
        f.rel = "data";
    }
    ~TempSource() { ::unlink(name); }
};

} // namespace

TEST_CASE("SourceReader checksums equal XXH3 of the whole block across read buffers") {
    const uint64_t w = sluice::SourceReader::kBufferBytes;
    TempSource src(3 * w + 12345);
    const auto& data = src.data;
    sluice::SourceReader reader;
    for (uint64_t off : {uint64_t{0}, uint64_t{4096}, uint64_t{777}, w - 1})
        for (uint64_t len : {uint64_t{1}, w - 1, w, w + 1, 2 * w + 4096, data.size() - off}) {
            if (off + len > data.size()) continue;
            CAPTURE(off);
            CAPTURE(len);
            CHECK(reader.checksum(src.f, off, len) == sluice::xxh3_64(data.data() + off, len));
        }
}

// A caller's range whose file is shorter than the range at read time, with the file's identity
// (size, mtime) unchanged: the read ends early at a known point, with no timing involved.
// Before, the checksum read a mapping past end of file and the process died of SIGBUS.
TEST_CASE("a block past the end of its file is an Error(source) naming the file, not SIGBUS") {
    TempSource src(3 * 4096 + 100);
    int fd = ::open(src.name, O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    sluice::SourceFile f = src.f;
    f.path = std::string("fd ") + std::to_string(fd);
    f.fd = fd;
    f.file_size = src.data.size();
    f.file_mtime_ns = src.f.mtime_ns;
    f.base = 8192;           // the range starts 8192 bytes in...
    f.size = 4 * 4096 + 100; // ...and claims more than the 4196 bytes the file has there
    sluice::SourceReader reader;
    try {
        (void)reader.checksum(f, 0, f.size);
        FAIL("no error");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::source);
        CHECK(std::string(e.what()) == "source '" + f.path +
                                           "' shrank while being sent: expected 16484 bytes at offset 8192, got 4196"
                                           "; run the transfer again once nothing truncates it");
    }
    std::vector<unsigned char> out(f.size);
    try {
        reader.read_whole(f, out.data());
        FAIL("no error");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::source);
        CHECK(std::string(e.what()).find("shrank while being sent: expected 16484 bytes at offset 8192, got 4196") !=
              std::string::npos);
    }
    ::close(fd);
}
