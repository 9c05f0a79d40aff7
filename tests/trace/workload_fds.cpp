// workload fds FILE: one short-lived process makes fds with each syscall the no-kernel-reads
// probe follows and moves a known number of bytes through each, so the test can check every
// class without /proc (SLUICE_TRACE_NO_LATE_PROC=1). The counts are in trace_cases.py.
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

constexpr size_t chunk = 64 << 10; // fits any pipe or socket buffer: a write never blocks

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "workload fds: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

void write_all(int fd, size_t n) {
    std::vector<char> buf(chunk, 'x');
    for (size_t done = 0; done < n; done += chunk)
        if (write(fd, buf.data(), chunk) != static_cast<ssize_t>(chunk)) die("write");
}

// n bytes through a connected pair: write a chunk on wr, read it back on rd.
void through(int wr, int rd, size_t n) {
    std::vector<char> buf(chunk);
    for (size_t done = 0; done < n; done += chunk) {
        write_all(wr, chunk);
        for (size_t got = 0; got < chunk;) {
            ssize_t r = read(rd, buf.data(), chunk - got);
            if (r <= 0) die("read");
            got += static_cast<size_t>(r);
        }
    }
}

// Reads fd to its end, or its first MiB; closes it.
void read_and_close(int fd, bool first_mib_only = false) {
    if (fd < 0) die("open FILE");
    std::vector<char> buf(1 << 20);
    while (read(fd, buf.data(), buf.size()) > 0 && !first_mib_only) {}
    close(fd);
}

} // namespace

int run_fds(const char* path) {
    // Work in FILE's directory: relative opens below (and in the child) name FILE by its base
    // name, which user space can stat after the process is gone only by following the cwd.
    std::string dir(path), name(path);
    dir.erase(dir.rfind('/'));
    name.erase(0, name.rfind('/') + 1);
    if (chdir(dir.c_str()) != 0) die("chdir");
    // /dev/null through openat and every way of copying an fd: 5 x 1 MiB, all no data.
    int null_fd = openat(AT_FDCWD, "/dev/null", O_WRONLY);
    int copies[] = {null_fd, dup(null_fd), dup2(null_fd, 40), dup3(null_fd, 41, O_CLOEXEC), fcntl(null_fd, F_DUPFD, 50)};
    for (int fd : copies) {
        if (fd < 0) die("/dev/null and its copies");
        write_all(fd, 1 << 20);
    }
    // Above the probe's per-process table (SL_FD_SLOTS): 1 MiB more, also /dev/null.
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max < 4096 ? lim.rlim_max : 4096;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0 || dup2(null_fd, 2000) != 2000) die("fd 2000 (needs RLIMIT_NOFILE above 2000)");
    write_all(2000, 1 << 20);
    // stdout, which the process had before tracing started (the test makes it /dev/null).
    write_all(1, 1 << 20);
    // Numbers freed by close and by close_range, reused by a syscall the probe does not follow
    // (eventfd): not /dev/null any more. 2 x 500 writes of 8 bytes, resolvable only via /proc.
    close(copies[0]);
    if (syscall(SYS_close_range, copies[1], copies[1], 0) != 0) die("close_range");
    for (int reused : {copies[0], copies[1]}) {
        int efd = eventfd(0, 0);
        if (efd != reused) die("eventfd did not reuse the closed number");
        for (uint64_t i = 0, one = 1; i < 500; ++i)
            if (write(efd, &one, sizeof(one)) != sizeof(one)) die("eventfd write");
    }
    // Pipe: 1 MiB from here, 1 MiB from a forked child that inherited the write end.
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) die("pipe2");
    through(p[1], p[0], 1 << 20);
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) { // its table is a copy of ours; stdout is still the one from the start
        write_all(p[1], 1 << 20);
        write_all(1, 1 << 20);
        read_and_close(open(name.c_str(), O_RDONLY), true); // its cwd is ours
        _exit(0);
    }
    std::vector<char> buf(chunk);
    for (size_t got = 0; got < (1u << 20);) {
        ssize_t r = read(p[0], buf.data(), buf.size());
        if (r <= 0) die("read pipe");
        got += static_cast<size_t>(r);
    }
    int st = 0;
    waitpid(child, &st, 0);
    // Sockets: 2 MiB through a socketpair, 1 MiB through socket + connect / accept4.
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) die("socketpair");
    through(sv[0], sv[1], 2 << 20);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "sluice-trace-fds-%d", getpid()); // abstract
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + std::strlen(addr.sun_path + 1));
    int srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int cli = socket(AF_UNIX, SOCK_STREAM, 0);
    if (srv < 0 || cli < 0 || bind(srv, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(srv, 1) != 0 ||
        connect(cli, reinterpret_cast<sockaddr*>(&addr), len) != 0)
        die("socket/bind/listen/connect");
    int acc = accept4(srv, nullptr, nullptr, SOCK_CLOEXEC);
    if (acc < 0) die("accept4");
    through(cli, acc, 1 << 20);
    // Files: FILE read once by its absolute path, then its first MiB three times by its name:
    // open (the cwd), openat (a directory fd), open after fchdir (from elsewhere); 512 KiB
    // written to a memfd.
    read_and_close(open(path, O_RDONLY));
    read_and_close(open(name.c_str(), O_RDONLY), true);
    int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    read_and_close(openat(dir_fd, name.c_str(), O_RDONLY), true);
    if (chdir("/") != 0 || fchdir(dir_fd) != 0) die("chdir / fchdir");
    read_and_close(open(name.c_str(), O_RDONLY), true);
    int mfd = memfd_create("sluice-trace-fds", MFD_CLOEXEC);
    if (mfd < 0) die("memfd_create");
    write_all(mfd, 512 << 10);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
