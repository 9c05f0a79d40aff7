// The receiver's confined destination tree (recv/store/dest_tree.hpp): no path from the network
// ('..', absolute, through a symlink planted in DIR, whatever it points at) reaches outside DIR
// or follows a symlink, make_dirs creates exactly what was asked, and every error is a
// destination Error naming the path. Each case works in top/, with DIR = top/dest and a
// directory outside it, top/outside, that nothing may create anything in.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "recv/store/dest_tree.hpp"
#include "sluice/error.hpp"
#include "temp_dir.hpp"

using namespace sluice;
namespace fs = std::filesystem;

namespace {

struct Fixture {
    unit_test::TempDir top;
    fs::path dir = top.path / "dest";
    fs::path outside = top.path / "outside";
    Fixture() {
        fs::create_directory(dir);
        fs::create_directory(outside);
    }
    bool outside_empty() const { return fs::is_empty(outside) && !fs::exists(top.path / "escaped"); }
};

// The Error f throws; fails the test case if it throws none.
template <class F> Error error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    FAIL("no sluice::Error thrown");
    return Error(ErrorCode::internal, "unreachable");
}

bool is_dir(const fs::path& p) { return fs::is_directory(fs::symlink_status(p)); }

} // namespace

TEST_CASE("a missing or non-directory destination is refused, naming it") {
    Fixture t;
    Error missing = error_of([&] { DestTree tree(t.dir / "nope"); });
    CHECK(missing.code() == ErrorCode::destination);
    CHECK(std::string(missing.what()).find((t.dir / "nope").string()) != std::string::npos);

    fs::path file = t.dir / "file";
    { std::ofstream(file) << "x"; }
    Error not_dir = error_of([&] { DestTree tree(file); });
    CHECK(not_dir.code() == ErrorCode::destination);
    CHECK(std::string(not_dir.what()).find(file.string() + "' is not a directory") != std::string::npos);
}

TEST_CASE("make_dirs creates every missing level, and again is a no-op") {
    Fixture t;
    DestTree tree(t.dir);
    tree.make_dirs("a/b/c");
    CHECK(is_dir(t.dir / "a"));
    CHECK(is_dir(t.dir / "a/b"));
    CHECK(is_dir(t.dir / "a/b/c"));
    CHECK_NOTHROW(tree.make_dirs("a/b/c"));
    tree.make_dirs("a/d");
    CHECK(is_dir(t.dir / "a/d"));
    CHECK_NOTHROW(tree.make_dirs("")); // DIR itself
    // Only what was asked: nothing beside it, nothing outside.
    size_t n = 0;
    for (auto& e : fs::recursive_directory_iterator(t.dir)) n += e.is_directory() ? 1 : 100;
    CHECK(n == 4);
    CHECK(t.outside_empty());

    UniqueFd fd = tree.open_dir("a/b");
    struct stat st = {};
    REQUIRE(fstat(fd.get(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK(tree.open_dir("").get() >= 0);
}

TEST_CASE("'..' that leaves DIR is refused, and nothing is created beside DIR") {
    Fixture t;
    DestTree tree(t.dir);
    for (const char* rel : {"..", "../outside", "a/../..", "x/../../outside"}) {
        CAPTURE(rel);
        Error e = error_of([&] { tree.open_dir(rel); });
        CHECK(e.code() == ErrorCode::destination);
        CHECK(std::string(e.what()).find(std::string("'") + rel + "'") != std::string::npos);
    }
    for (const char* rel : {"../escaped", "a/../../escaped", "../outside/escaped"}) {
        CAPTURE(rel);
        Error e = error_of([&] { tree.make_dirs(rel); });
        CHECK(e.code() == ErrorCode::destination);
        CHECK(std::string(e.what()).find(t.dir.string()) != std::string::npos);
    }
    CHECK(t.outside_empty());
}

TEST_CASE("an absolute path is refused, not resolved from /") {
    Fixture t;
    DestTree tree(t.dir);
    std::string abs = t.outside.string();
    Error e = error_of([&] { tree.open_dir(abs); });
    CHECK(e.code() == ErrorCode::destination);
    CHECK(std::string(e.what()).find("refusing '" + abs + "'") != std::string::npos);
    CHECK_THROWS_AS(tree.make_dirs(abs + "/escaped"), Error);
    CHECK(t.outside_empty());
}

TEST_CASE("a symlink planted in DIR pointing outside is never followed") {
    Fixture t;
    fs::create_directory_symlink(t.outside, t.dir / "link");
    fs::create_directories(t.dir / "deep/er");
    fs::create_directory_symlink("/", t.dir / "deep/er/root");
    DestTree tree(t.dir);
    for (const char* rel : {"link", "deep/er/root", "deep/er/root/tmp"}) {
        CAPTURE(rel);
        Error e = error_of([&] { tree.open_dir(rel); });
        CHECK(e.code() == ErrorCode::destination);
        CHECK(std::string(e.what()).find(std::string("refusing '") + rel + "' in '" + t.dir.string() + "'") != std::string::npos);
    }
    CHECK_THROWS_AS(tree.make_dirs("link"), Error);
    CHECK_THROWS_AS(tree.make_dirs("link/escaped"), Error);
    CHECK_THROWS_AS(tree.make_dirs("deep/er/root/escaped-into-root"), Error);
    CHECK(t.outside_empty());
    CHECK_FALSE(fs::exists("/escaped-into-root"));
    CHECK(fs::is_symlink(t.dir / "link")); // refused, not replaced
}

TEST_CASE("a symlinked parent is refused even when it points inside DIR") {
    Fixture t;
    fs::create_directory(t.dir / "real");
    fs::create_directory_symlink("real", t.dir / "alias");
    DestTree tree(t.dir);
    CHECK_NOTHROW(tree.open_dir("real"));
    Error e = error_of([&] { tree.make_dirs("alias/sub"); });
    CHECK(e.code() == ErrorCode::destination);
    CHECK(std::string(e.what()).find("'alias") != std::string::npos);
    CHECK_FALSE(fs::exists(t.dir / "real/sub"));
    CHECK_THROWS_AS(tree.open_dir("alias"), Error);
}

TEST_CASE("a file in the way of make_dirs is an error naming the path") {
    Fixture t;
    fs::create_directory(t.dir / "a");
    { std::ofstream(t.dir / "a/file") << "x"; }
    DestTree tree(t.dir);
    Error e = error_of([&] { tree.make_dirs("a/file/sub"); });
    CHECK(e.code() == ErrorCode::destination);
    CHECK(std::string(e.what()).find("'a/file") != std::string::npos);
    CHECK(std::string(e.what()).find(t.dir.string()) != std::string::npos);
    CHECK(fs::is_regular_file(t.dir / "a/file"));
}

TEST_CASE("without a directory every open fails with a destination Error") {
    DestTree none;
    CHECK(none.display() == "(no directory)");
    Error e = error_of([&] { none.open_dir("a"); });
    CHECK(e.code() == ErrorCode::destination);
    CHECK(std::string(e.what()).find("'a'") != std::string::npos);
}

TEST_CASE("path pieces and temporary names") {
    CHECK(DestTree::parent_of("a/b/c") == "a/b");
    CHECK(DestTree::parent_of("c") == "");
    CHECK(DestTree::name_of("a/b/c") == "c");
    CHECK(DestTree::name_of("c") == "c");
    // Deterministic (a resume finds the same file), one per path, a name in its parent.
    CHECK(DestTree::temp_name("a/b") == DestTree::temp_name("a/b"));
    CHECK(DestTree::temp_name("a/b") != DestTree::temp_name("a/c"));
    CHECK(DestTree::temp_name("a/b").find('/') == std::string::npos);
    CHECK(DestTree::temp_name("a/b").rfind(".sluice-part.", 0) == 0);
    // The same name every version has given (an earlier run's journal is found by it): the
    // path's XXH3 in 16 lowercase hex digits, leading zeros kept.
    std::vector<std::string> paths{"a/b", "", "minor/000/f000001.bin", "x/y/z"};
    for (int i = 0;; ++i) { // and one whose hash starts with a zero digit
        const std::string p = "p" + std::to_string(i);
        if (XXH3_64bits(p.data(), p.size()) >> 60 == 0) {
            paths.push_back(p);
            break;
        }
    }
    for (const std::string& p : paths) {
        char want[40];
        std::snprintf(want, sizeof want, ".sluice-part.%016llx",
                      static_cast<unsigned long long>(XXH3_64bits(p.data(), p.size())));
        CHECK(DestTree::temp_name(p) == want);
    }
}

TEST_CASE("ParentDirCache reopens only when the directory changes") {
    Fixture t;
    DestTree tree(t.dir);
    tree.make_dirs("a");
    tree.make_dirs("b");
    ParentDirCache cache(tree);
    int a = cache.get("a");
    CHECK(cache.get("a") == a);
    struct stat sa = {}, sb = {}, want = {};
    REQUIRE(fstat(a, &sa) == 0);
    int b = cache.get("b");
    REQUIRE(fstat(b, &sb) == 0);
    REQUIRE(stat((t.dir / "b").c_str(), &want) == 0);
    CHECK(sb.st_ino == want.st_ino);
    CHECK(sa.st_ino != sb.st_ino);
}
