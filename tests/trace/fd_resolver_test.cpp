// What user space resolves for the no-kernel-reads probe: /proc for fds, stat for open paths.
// On this test's own fds, so no root and no BPF.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "fd_resolver.hpp"

#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace sluice::trace;

namespace {

sl_open_event open_event(uint32_t id, int fd, const char* path, int dirfd = AT_FDCWD, uint32_t flags = 0) {
    sl_open_event e{};
    e.ev.kind = SL_EV_FD_OPEN;
    e.ev.tgid = static_cast<uint32_t>(getpid());
    e.ev.fd = fd;
    e.ev.id = id;
    e.ev.flags = flags;
    e.dirfd = dirfd;
    std::strncpy(e.path, path, sizeof(e.path) - 1);
    e.path_len = static_cast<int32_t>(std::strlen(e.path) + 1);
    return e;
}

} // namespace

TEST_CASE("/proc/PID/fd: class, access mode, O_DIRECT-free, close-on-exec") {
    auto me = static_cast<uint32_t>(getpid());
    int p[2], sv[2];
    REQUIRE(pipe2(p, O_CLOEXEC) == 0);
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int null_fd = open("/dev/null", O_WRONLY);
    CHECK(FdResolver::resolve(me, p[0]).cls == FdClass::pipe);
    CHECK(!FdResolver::resolve(me, p[0]).writable);
    CHECK(FdResolver::resolve(me, p[1]).writable);
    CHECK(FdResolver::resolve(me, p[1]).cloexec);
    CHECK(FdResolver::resolve(me, sv[0]).cls == FdClass::socket);
    CHECK(!FdResolver::resolve(me, sv[0]).cloexec);
    CHECK(FdResolver::resolve(me, null_fd).cls == FdClass::devnull);
    CHECK(FdResolver::resolve(me, 12345).cls == FdClass::unresolved);
    bool listed = false;
    for (const auto& [fd, info] : FdResolver::list(me)) listed = listed || (fd == null_fd && info.cls == FdClass::devnull);
    CHECK(listed);
    for (int fd : {p[0], p[1], sv[0], sv[1], null_fd}) close(fd);
}

TEST_CASE("open paths: /proc while the fd is that file, the path after it is gone") {
    char dir[] = "/tmp/sluice-fd-resolver-XXXXXX";
    REQUIRE(mkdtemp(dir));
    std::string file = std::string(dir) + "/f";
    int fd = open(file.c_str(), O_WRONLY | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    uint32_t current = 7; // the probe's id for (me, fd)
    FdResolver r([&](uint32_t, int32_t) { return current; });
    r.opened(open_event(7, fd, file.c_str(), AT_FDCWD, SL_FLAG_FD_WRITABLE));
    CHECK(r.lookup(7).cls == FdClass::file);
    CHECK(r.lookup(7).writable); // from the open flags the probe saw
    CHECK(r.counts().opened_proc == 1);
    // The fd was closed before the event was read: the path decides.
    current = 0;
    r.opened(open_event(8, fd, file.c_str()));
    r.opened(open_event(9, fd, "/dev/zero"));
    CHECK(r.lookup(8).cls == FdClass::file);
    CHECK(r.lookup(9).cls == FdClass::devzero);
    CHECK(r.counts().opened_path == 2);
    // Paths that name the opener's own fds, relative paths without /proc, removed files: unresolved.
    FdResolver strict([](uint32_t, int32_t) { return 0u; }, false);
    strict.opened(open_event(10, fd, "/dev/stdout"));
    strict.opened(open_event(11, fd, "f", AT_FDCWD));
    unlink(file.c_str());
    strict.opened(open_event(12, fd, file.c_str()));
    for (uint32_t id : {10u, 11u, 12u}) CHECK(strict.lookup(id).cls == FdClass::unresolved);
    CHECK(strict.counts().unresolved == 3);
    close(fd);
    rmdir(dir);
}

TEST_CASE("an fd seen in use: /proc only, and only while it is the same incarnation") {
    int null_fd = open("/dev/null", O_WRONLY);
    sl_event ev{};
    ev.kind = SL_EV_FD_SEEN;
    ev.tgid = static_cast<uint32_t>(getpid());
    ev.fd = null_fd;
    ev.id = 3;
    uint32_t current = 3;
    FdResolver r([&](uint32_t, int32_t) { return current; });
    r.seen(ev);
    CHECK(r.lookup(3).cls == FdClass::devnull);
    CHECK(r.counts().seen_proc == 1);
    current = 4; // closed and reopened meanwhile
    ev.id = 5;
    r.seen(ev);
    CHECK(r.lookup(5).cls == FdClass::unresolved);
    FdResolver no_proc([&](uint32_t, int32_t) { return current; }, false);
    ev.id = 4;
    no_proc.seen(ev);
    CHECK(no_proc.lookup(4).cls == FdClass::unresolved);
    close(null_fd);
}

TEST_CASE("relative open paths: against the cwd followed through fork and chdir, or a directory fd") {
    char dir[] = "/tmp/sluice-fd-resolver-XXXXXX";
    REQUIRE(mkdtemp(dir));
    std::string sub = std::string(dir) + "/sub";
    REQUIRE(mkdir(sub.c_str(), 0700) == 0);
    close(open((sub + "/f").c_str(), O_WRONLY | O_CREAT, 0600));
    FdResolver r([](uint32_t, int32_t) { return 0u; }, false); // as if every fd were gone
    const auto me = static_cast<uint32_t>(getpid());
    sl_open_event cd = open_event(0, AT_FDCWD, dir); // chdir(dir)
    cd.ev.kind = SL_EV_CHDIR;
    r.chdir(cd);
    r.forked(me + 1, me); // a child has its parent's cwd
    sl_open_event in_child = open_event(1, 3, "sub/f");
    in_child.ev.tgid = me + 1;
    r.opened(in_child);
    CHECK(r.lookup(1).cls == FdClass::file);
    r.opened(open_event(2, 4, "sub")); // a directory, then openat(4, "f") and fchdir(4)
    sl_open_event at = open_event(3, 5, "f", 4);
    at.dir_id = 2;
    r.opened(at);
    CHECK(r.lookup(3).cls == FdClass::file);
    sl_open_event fcd = open_event(2, 4, ""); // fchdir(4): its id, no path
    fcd.ev.kind = SL_EV_CHDIR;
    fcd.path_len = 0;
    r.chdir(fcd);
    r.opened(open_event(4, 6, "f"));
    CHECK(r.lookup(4).cls == FdClass::file);
    // A process whose cwd was never known: unresolved, not a guess.
    sl_open_event stranger = open_event(5, 3, "sub/f");
    stranger.ev.tgid = me + 2;
    r.opened(stranger);
    CHECK(r.lookup(5).cls == FdClass::unresolved);
    unlink((sub + "/f").c_str());
    rmdir(sub.c_str());
    rmdir(dir);
}
