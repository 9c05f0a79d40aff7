// Issue 14 through the public API: a source truncated while it is sent, pre-1970 mtimes and
// pseudo-files given as FdSources. Runs under the LD_PRELOAD truncation shim
// (tests/shim/truncate_shim.c), which this process arms with setenv at a known point: the
// first read (or mapping) of the source at or after a given offset, where a block's checksum
// starts. Before the fix the checksum read a mapping past the new end of file and this whole
// process died of SIGBUS.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>

#include "api_fixture.hpp"

using namespace api_test;

namespace {

constexpr uint64_t kMiB = 1 << 20;

// Arms the shim for one test: truncate `path` to `to` bytes when it is first read at >= at.
struct ArmedTruncation {
    ArmedTruncation(const fs::path& path, uint64_t at, uint64_t to) {
        REQUIRE_MESSAGE(std::getenv("LD_PRELOAD"), "run under the truncation shim (meson test api-hostile-source)");
        ::setenv("SLUICE_TEST_TRUNCATE_MATCH", path.c_str(), 1);
        ::setenv("SLUICE_TEST_TRUNCATE_AT", std::to_string(at).c_str(), 1);
        ::setenv("SLUICE_TEST_TRUNCATE_TO", std::to_string(to).c_str(), 1);
    }
    ~ArmedTruncation() { ::unsetenv("SLUICE_TEST_TRUNCATE_MATCH"); }
};

int64_t mtime_ns(const fs::path& p) {
    struct stat st = {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

} // namespace

TEST_CASE("a source truncated while a block is checksummed fails send() with Error(source) naming it") {
    TempDir src, dst;
    const fs::path file = src.path / "app.log";
    write_file(file, random_bytes(4 * kMiB, 3));
    sluice::Receiver rx(dst.path, loopback_recv());
    Waiter w(rx);
    auto o = quick_send(1); // one stream: blocks in order, so the block at 2 MiB is the one cut
    o.block_size = kMiB;
    ArmedTruncation cut(file, 2 * kMiB, 2 * kMiB + kMiB / 2);
    try {
        sluice::send({file.string()}, sluice::parse_url(rx.url()), o);
        FAIL("send() succeeded");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::source);
        CHECK(std::string(e.what()).find("source '" + file.string() +
                                         "' shrank while being sent: expected 1048576 bytes at offset 2097152, got 524288") !=
              std::string::npos);
    }
    CHECK_THROWS_AS(w.get(), sluice::Error);
    CHECK_FALSE(fs::exists(dst.path / "app.log"));
}

TEST_CASE("an FdSource range whose file is truncated while it is sent fails with Error(source)") {
    TempDir src, dst;
    const fs::path file = src.path / "db.img";
    write_file(file, random_bytes(4 * kMiB, 4));
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    sluice::Receiver rx(dst.path, loopback_recv());
    Waiter w(rx);
    auto o = quick_send(1);
    o.block_size = kMiB;
    ArmedTruncation cut(file, 2 * kMiB, 2 * kMiB);
    try {
        sluice::send(std::vector<sluice::FdSource>{{fd, 0, 4 * kMiB, "db.img", 0644, -1}}, sluice::parse_url(rx.url()), o);
        FAIL("send() succeeded");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::source);
        CHECK(std::string(e.what()).find("shrank while being sent: expected 1048576 bytes at offset 2097152, got 0") !=
              std::string::npos);
    }
    CHECK_THROWS_AS(w.get(), sluice::Error);
    ::close(fd);
}

TEST_CASE("pre-1970 fractional mtimes arrive exactly, from paths and from FdSources") {
    TempDir src, dst;
    const fs::path file = src.path / "restored";
    write_file(file, "old data");
    const int64_t half_second_before_1970 = -500'000'000;
    timespec t[2] = {{-1, 500'000'000}, {-1, 500'000'000}};
    REQUIRE(::utimensat(AT_FDCWD, file.c_str(), t, 0) == 0);
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    {
        sluice::Receiver rx(dst.path, loopback_recv());
        Waiter w(rx);
        sluice::send({file.string()}, sluice::parse_url(rx.url()), quick_send(1));
        w.get();
    }
    CHECK(mtime_ns(dst.path / "restored") == half_second_before_1970);
    {
        sluice::Receiver rx(dst.path, loopback_recv());
        Waiter w(rx);
        // A caller's own pre-1970 time: kept (only -1 means "the file's own").
        sluice::send(std::vector<sluice::FdSource>{{fd, 0, 8, "given", 0644, -1'000'000'001}}, sluice::parse_url(rx.url()),
                     quick_send(1));
        w.get();
    }
    CHECK(mtime_ns(dst.path / "given") == -1'000'000'001);
    ::close(fd);
}

TEST_CASE("a pseudo-file given as an FdSource (size 0, yet it has data) is refused, not sent empty") {
    int fd = ::open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    sluice::Endpoint nowhere{"127.0.0.1", 1, "token"}; // never reached: checks come first
    try {
        sluice::send(std::vector<sluice::FdSource>{{fd, 0, 0, "cpuinfo", 0644, -1}}, nowhere, quick_send(1));
        FAIL("accepted");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::source);
        CHECK(std::string(e.what()).find("reports a size of 0 but has data") != std::string::npos);
    }
    ::close(fd);
    // And as a path.
    try {
        sluice::send({std::string("/proc/cpuinfo")}, nowhere, quick_send(1));
        FAIL("accepted");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::source);
        CHECK(std::string(e.what()).find("is a pseudo-file (procfs)") != std::string::npos);
    }
}
