// Times before 1970 with a fractional second: nanoseconds <-> timespec must use floor
// division (0 <= tv_nsec < 1e9) and round-trip exactly; futimens refused the truncated form.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <limits>

#include "core/io/file_times.hpp"
#include "temp_dir.hpp"

using sluice::ns_of;
using sluice::ns_of_checked;
using sluice::timespec_of;

TEST_CASE("timespec_of floors: tv_nsec is in [0, 1e9) and the round trip is exact") {
    const int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
    for (int64_t ns : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{-500'000'000}, int64_t{-1'000'000'000}, int64_t{-999'999'999},
                       int64_t{-1'000'000'001}, int64_t{-1'500'000'000},
                       int64_t{-2'208'988'800'000'000'000} + 123'456'789, // 1900-01-01 00:00:00.123456789
                       int64_t{1'600'000'000'123'456'789}, kMin, kMin + 1, kMax, kMax - 1}) {
        CAPTURE(ns);
        const timespec t = timespec_of(ns);
        CHECK(t.tv_nsec >= 0);
        CHECK(t.tv_nsec < 1'000'000'000);
        CHECK(static_cast<__int128>(t.tv_sec) * 1'000'000'000 + t.tv_nsec == ns);
        REQUIRE(ns_of_checked(t).has_value());
        CHECK(*ns_of_checked(t) == ns);
    }
    CHECK(timespec_of(-500'000'000).tv_sec == -1);
    CHECK(timespec_of(-500'000'000).tv_nsec == 500'000'000);
}

TEST_CASE("ns_of_checked refuses times an int64 of nanoseconds cannot hold") {
    CHECK_FALSE(ns_of_checked(timespec{-9'223'372'037, 0}).has_value());          // just before INT64_MIN
    CHECK_FALSE(ns_of_checked(timespec{9'223'372'036, 854'775'808}).has_value()); // INT64_MAX + 1
    CHECK_FALSE(ns_of_checked(timespec{-15'000'000'000, 0}).has_value());         // year 1494
    CHECK_FALSE(ns_of_checked(timespec{0, -1}).has_value());
    CHECK(ns_of(timespec{-15'000'000'000, 0}) == std::numeric_limits<int64_t>::min());
}

// 1906 at the oldest: ext4 (what /tmp is here) clamps times before 1901-12-13 to that day.
TEST_CASE("FileTimes sets a pre-1970 fractional mtime that reads back exactly") {
    unit_test::TempDir dir;
    const std::string p = (dir.path / "old").string();
    int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    for (int64_t ns : {int64_t{-500'000'000}, int64_t{-1'000'000'001}, int64_t{-2'000'000'000'000'000'000} + 5}) {
        CAPTURE(ns);
        REQUIRE(::futimens(fd, sluice::FileTimes(ns).t) == 0);
        struct stat st = {};
        REQUIRE(::fstat(fd, &st) == 0);
        CHECK(ns_of(st.st_mtim) == ns);
    }
    ::close(fd);
}
