// send(std::vector<FdSource>): ranges of files the caller already has open.
#include <doctest/doctest.h>
#include <fcntl.h>

#include "api_fixture.hpp"

using namespace api_test;

// doctest has no generators: each send path is a subcase.
#define GENERATE_PATH()                                                                                                          \
    [] {                                                                                                                         \
        sluice::SendPath p = sluice::SendPath::splice;                                                                           \
        SUBCASE("splice") { p = sluice::SendPath::splice; }                                                                      \
        SUBCASE("sendfile") { p = sluice::SendPath::sendfile; }                                                                  \
        SUBCASE("read_send") { p = sluice::SendPath::read_send; }                                                                \
        SUBCASE("zc") { p = sluice::SendPath::zc; }                                                                              \
        return p;                                                                                                                \
    }()

TEST_CASE("ranges of open files land under their names, byte for byte, on every send path") {
    const sluice::SendPath path = GENERATE_PATH();
    CAPTURE(sluice::send_path_name(path));
    TempDir src, dst;
    const std::string data = random_bytes(2 * (1 << 20) + 4321, 5);
    write_file(src.path / "db.img", data);
    int fd = ::open((src.path / "db.img").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    sluice::Receiver rx(dst.path, loopback_recv());
    Waiter w(rx);
    std::vector<sluice::FdSource> parts = {
        {fd, 0, 1 << 20, "parts/first", 0640, -1},
        {fd, 1000, 300000, "parts/unaligned", 0600, 1'000'000'000'000'000'000},
        {fd, 1 << 20, data.size() - (1 << 20), "parts/rest", 0644, -1},
        {fd, 5, 0, "parts/empty", 0644, -1},
    };
    auto o = quick_send(2);
    o.path = path;
    sluice::Stats sent = sluice::send(parts, sluice::parse_url(rx.url()), o);
    w.get();
    ::close(fd);
    CHECK(sent.files == 4);
    CHECK(read_file(dst.path / "parts/first") == data.substr(0, 1 << 20));
    CHECK(read_file(dst.path / "parts/unaligned") == data.substr(1000, 300000));
    CHECK(read_file(dst.path / "parts/rest") == data.substr(1 << 20));
    CHECK(read_file(dst.path / "parts/empty").empty());
    CHECK((fs::status(dst.path / "parts/first").permissions() & fs::perms::all) == static_cast<fs::perms>(0640));
    CHECK(fs::last_write_time(dst.path / "parts/unaligned").time_since_epoch().count() != 0);
}

TEST_CASE("bad fd sources are refused before connecting, naming the source") {
    TempDir src;
    write_file(src.path / "small", "0123456789");
    int fd = ::open((src.path / "small").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    sluice::Endpoint nowhere{"127.0.0.1", 1, "token"}; // never reached: checks come first
    auto expect = [&](std::vector<sluice::FdSource> v, sluice::ErrorCode code, const char* words) {
        try {
            sluice::send(v, nowhere, quick_send(1));
            FAIL("accepted");
        } catch (const sluice::Error& e) {
            CHECK(e.code() == code);
            CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
        }
    };
    expect({{fd, 4, 7, "x", 0644, -1}}, sluice::ErrorCode::source, "beyond the end");
    expect({{fd, 0, 1, "../escape", 0644, -1}}, sluice::ErrorCode::usage, "../escape");
    expect({{fd, 0, 1, "", 0644, -1}}, sluice::ErrorCode::usage, "name");
    expect({{9999, 0, 1, "x", 0644, -1}}, sluice::ErrorCode::source, "fd 9999");
    expect({{fd, 0, 1, "same", 0644, -1}, {fd, 1, 1, "same", 0644, -1}}, sluice::ErrorCode::usage, "twice");
    ::close(fd);
}

TEST_CASE("an open directory and an O_PATH symlink are sent as a directory and a link") {
    TempDir src, dst;
    fs::create_directories(src.path / "empty");
    fs::permissions(src.path / "empty", static_cast<fs::perms>(0750));
    fs::create_symlink("../somewhere/else", src.path / "link");
    int dir = ::open((src.path / "empty").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int link = ::open((src.path / "link").c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    REQUIRE(dir >= 0);
    REQUIRE(link >= 0);
    sluice::Receiver rx(dst.path, loopback_recv());
    Waiter w(rx);
    std::vector<sluice::FdSource> v = {{dir, 0, 0, "a/empty", 0750, -1}, {link, 0, 0, "a/link", 0777, -1}};
    sluice::Stats sent = sluice::send(v, sluice::parse_url(rx.url()), quick_send(1));
    w.get();
    CHECK(sent.files == 0);
    CHECK(fs::is_directory(dst.path / "a/empty"));
    CHECK(fs::is_empty(dst.path / "a/empty"));
    CHECK((fs::status(dst.path / "a/empty").permissions() & fs::perms::all) == static_cast<fs::perms>(0750));
    CHECK(fs::is_symlink(dst.path / "a/link"));
    CHECK(fs::read_symlink(dst.path / "a/link") == "../somewhere/else");

    sluice::Endpoint nowhere{"127.0.0.1", 1, "token"}; // refused before connecting
    try {
        sluice::send({{dir, 0, 5, "d", 0755, -1}}, nowhere, quick_send(1));
        FAIL("a directory with a length was accepted");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::usage);
        CHECK(std::string(e.what()).find("offset and length must be 0") != std::string::npos);
    }
    ::close(dir);
    ::close(link);
}
