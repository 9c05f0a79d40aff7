// What the sender accepts on its command line and lists from a tree (issue 14, items 9, 10
// and the receiver's DIR): symlink operands followed under their own name, pipes and devices
// refused with the pipe-mode hint, pseudo-files refused, `a/lnk/..` named after what is read,
// a receiver's DIR skipped, pre-1970 mtimes listed exactly.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/io/file_times.hpp"
#include "core/io/unique_fd.hpp"
#include "send/plan/source_tree.hpp"
#include "sluice/error.hpp"
#include "temp_dir.hpp"

using namespace sluice;

namespace {

void write(const std::string& p, const std::string& data) { std::ofstream(p, std::ios::binary) << data; }

// check_sources' error for paths, or "" if it accepted them.
std::string refusal(const std::vector<std::string>& paths) {
    try {
        check_sources(paths);
        return "";
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::source);
        return e.what();
    }
}

struct Listed {
    std::map<std::string, wire::ManifestEntry> entries;
    std::map<std::string, std::string> sources;
    std::vector<std::string> skipped;
};

Listed walk(const std::vector<std::string>& paths) {
    Listed out;
    WalkVisitor v;
    v.entry = [&](wire::ManifestEntry&& e, std::string&& src, uint64_t) {
        out.sources[e.path] = src;
        out.entries[e.path] = std::move(e);
    };
    v.skipped = [&](std::string_view line) { out.skipped.emplace_back(line); };
    walk_sources(check_sources(paths), v);
    return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

} // namespace

TEST_CASE("a symlink given as a source is followed and keeps its own name; inside a tree it stays a symlink") {
    unit_test::TempDir t;
    const std::string d = t.path.string();
    write(d + "/real.txt", "hello");
    ::mkdir((d + "/tree").c_str(), 0755);
    write(d + "/tree/inner.txt", "x");
    REQUIRE(::symlink("real.txt", (d + "/lnk").c_str()) == 0);
    REQUIRE(::symlink("../real.txt", (d + "/tree/in-link").c_str()) == 0);
    REQUIRE(::symlink("tree", (d + "/tree-link").c_str()) == 0);

    Listed l = walk({d + "/lnk", d + "/tree-link"});
    REQUIRE(l.entries.count("lnk"));
    CHECK(l.entries["lnk"].kind == wire::EntryKind::file);
    CHECK(l.entries["lnk"].size == 5);
    CHECK(l.entries["tree-link"].kind == wire::EntryKind::directory);
    CHECK(l.entries["tree-link/inner.txt"].kind == wire::EntryKind::file);
    CHECK(l.entries["tree-link/in-link"].kind == wire::EntryKind::symlink);
    CHECK(l.entries["tree-link/in-link"].link_target == "../real.txt");

    REQUIRE(::symlink("nowhere", (d + "/dangling").c_str()) == 0);
    const std::string why = refusal({d + "/dangling"});
    CHECK(contains(why, "is a symlink to 'nowhere'"));
    CHECK(contains(why, "No such file"));
}

TEST_CASE("pipes, fifos and devices given as sources are refused with the pipe-mode hint") {
    unit_test::TempDir t;
    int p[2];
    REQUIRE(::pipe(p) == 0);
    const std::string via_fd = "/proc/self/fd/" + std::to_string(p[0]); // what <(producer) and /dev/stdin are
    std::string why = refusal({via_fd});
    CHECK(contains(why, "source '" + via_fd + "' is a pipe or fifo, not a file or directory"));
    CHECK(contains(why, "sluice send - URL"));
    ::close(p[0]);
    ::close(p[1]);

    const std::string fifo = (t.path / "fifo").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(contains(refusal({fifo}), "is a pipe or fifo"));
    CHECK(contains(refusal({"/dev/null"}), "is a character device"));
}

TEST_CASE("a file whose size reads 0 but which has data is refused, as an operand and inside a tree") {
    std::string why = refusal({"/proc/cpuinfo"});
    CHECK(contains(why, "source '/proc/cpuinfo' is a pseudo-file (procfs)"));
    CHECK(contains(why, "would arrive empty"));
    CHECK_THROWS_AS(walk({"/proc/sys/kernel/random"}), Error);
    // An empty regular file stays an empty file.
    unit_test::TempDir t;
    write((t.path / "empty").string(), "");
    CHECK(walk({(t.path / "empty").string()}).entries["empty"].size == 0);
}

TEST_CASE("a path ending in '..' is named after the directory it resolves to, not after its text") {
    unit_test::TempDir t;
    const std::string d = t.path.string();
    ::mkdir((d + "/a").c_str(), 0755);
    ::mkdir((d + "/b").c_str(), 0755);
    ::mkdir((d + "/b/c").c_str(), 0755);
    write(d + "/b/from-b", "b");
    REQUIRE(::symlink("../b/c", (d + "/a/lnk").c_str()) == 0);
    // The kernel resolves a/lnk/.. to b (the parent of lnk's target); the text says a.
    Listed l = walk({d + "/a/lnk/.."});
    CHECK(l.entries.count("b"));
    CHECK(l.entries.count("b/from-b"));
    CHECK_FALSE(l.entries.count("a"));
    CHECK(check_sources({d + "/b/."})[0].name == "b");
    CHECK(check_sources({d + "/b/c/"})[0].name == "c");
    CHECK(contains(refusal({"/"}), "has no name"));
}

TEST_CASE("a receiver's DIR (exclusively flocked) inside a tree is skipped with a warning; as the source, refused") {
    unit_test::TempDir t;
    const std::string d = t.path.string();
    ::mkdir((d + "/src").c_str(), 0755);
    ::mkdir((d + "/src/in").c_str(), 0755);
    write(d + "/src/a", "a");
    write(d + "/src/in/.sluice-part.x", "partial");
    UniqueFd lock(::open((d + "/src/in").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(lock);
    REQUIRE(::flock(lock.get(), LOCK_EX | LOCK_NB) == 0); // what a receiver holds on its DIR
    // flock locks belong to the open file description: another open of it sees the lock.
    Listed l = walk({d + "/src"});
    CHECK(l.entries.count("src/a"));
    CHECK_FALSE(l.entries.count("src/in"));
    CHECK_FALSE(l.entries.count("src/in/.sluice-part.x"));
    REQUIRE(l.skipped.size() == 1);
    CHECK(contains(l.skipped[0], "a sluice receiver is receiving into it"));
    CHECK(contains(refusal({d + "/src/in"}), "is the directory a sluice receiver is receiving into"));
    ::flock(lock.get(), LOCK_UN);
    // Unlocked, it is a tree holding a receiver's leftover temporary file, which a receiver
    // would take for its own: refused, naming it (h17n), unless a filter leaves it out.
    try {
        walk({d + "/src"});
        FAIL("a .sluice-part.* source was listed");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::source);
        CHECK(contains(e.what(), "src/in/.sluice-part.x': its name has the form of a sluice receiver's temporary file"));
    }
}

TEST_CASE("pre-1970 and fractional mtimes are listed exactly") {
    unit_test::TempDir t;
    const std::string f = (t.path / "old").string();
    write(f, "x");
    for (int64_t ns : {int64_t{-500'000'000}, int64_t{-1'000'000'001}, int64_t{-2'000'000'000'000'000'000} + 7}) {
        CAPTURE(ns);
        REQUIRE(::utimensat(AT_FDCWD, f.c_str(), FileTimes(ns).t, 0) == 0);
        CHECK(walk({f}).entries["old"].mtime_ns == ns);
    }
}
