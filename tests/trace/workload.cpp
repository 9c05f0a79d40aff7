// Known workloads for the trace tests; each moves one file's bytes in one well-defined way.
//   workload sendfile FILE        sendfile FILE -> pipe; a child splices the pipe to /dev/null
//   workload splice FILE OUT      splice FILE -> pipe; a child splices the pipe into OUT
//   workload uring FILE OUT       io_uring: READ FILE into memory, then SPLICE FILE -> pipe -> OUT
//   workload fds FILE             fds made every way the probe follows (workload_fds.cpp)
// No user-space copy of the payload happens in sendfile/splice; the uring READ is one.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <liburing.h>
#include <string>
#include <sys/stat.h>
#include <sys/sendfile.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "workload: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

off_t file_size(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) die("fstat");
    return st.st_size;
}

// Child: move everything from the pipe to out_fd with splice, until EOF.
pid_t drain_with_splice(int pipe_rd, int pipe_wr, int out_fd) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        close(pipe_wr); // or EOF never comes
        for (;;) {
            ssize_t n = splice(pipe_rd, nullptr, out_fd, nullptr, 1 << 20, SPLICE_F_MOVE);
            if (n < 0) die("splice pipe -> out");
            if (n == 0) _exit(0);
        }
    }
    return pid;
}

int wait_child(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) die("waitpid");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int run_sendfile(const char* path) {
    int in = open(path, O_RDONLY);
    int p[2];
    if (in < 0 || pipe(p) != 0) die("open/pipe");
    int null_fd = open("/dev/null", O_WRONLY);
    pid_t child = drain_with_splice(p[0], p[1], null_fd);
    close(p[0]);
    off_t left = file_size(in);
    while (left > 0) {
        ssize_t n = sendfile(p[1], in, nullptr, static_cast<size_t>(left));
        if (n <= 0) die("sendfile");
        left -= n;
    }
    close(p[1]);
    return wait_child(child);
}

int run_splice(const char* path, const char* out_path) {
    int in = open(path, O_RDONLY);
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int p[2];
    if (in < 0 || out < 0 || pipe(p) != 0) die("open/pipe");
    pid_t child = drain_with_splice(p[0], p[1], out);
    close(p[0]);
    for (;;) {
        ssize_t n = splice(in, nullptr, p[1], nullptr, 1 << 20, SPLICE_F_MOVE);
        if (n < 0) die("splice file -> pipe");
        if (n == 0) break;
    }
    close(p[1]);
    return wait_child(child);
}

// One SQE, waited for; returns res.
int uring_one(io_uring& ring, void (*prep)(io_uring_sqe*, void*), void* arg) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    prep(sqe, arg);
    io_uring_submit(&ring);
    io_uring_cqe* cqe;
    if (io_uring_wait_cqe(&ring, &cqe) != 0) die("io_uring_wait_cqe");
    int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    return res;
}

struct UringArgs {
    int in = -1, out = -1, pipe_rd = -1, pipe_wr = -1;
    char* buf = nullptr;
    unsigned len = 0;
    uint64_t off = 0;
};

int run_uring(const char* path, const char* out_path) {
    UringArgs a;
    a.in = open(path, O_RDONLY);
    a.out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int p[2];
    if (a.in < 0 || a.out < 0 || pipe(p) != 0) die("open/pipe");
    a.pipe_rd = p[0];
    a.pipe_wr = p[1];
    io_uring ring;
    if (io_uring_queue_init(8, &ring, 0) != 0) die("io_uring_queue_init");
    const off_t size = file_size(a.in);
    std::vector<char> buf(1 << 20);
    a.buf = buf.data();
    // Pass 1: IORING_OP_READ, a kernel -> user copy.
    for (a.off = 0; a.off < static_cast<uint64_t>(size);) {
        a.len = static_cast<unsigned>(buf.size());
        int r = uring_one(
            ring,
            [](io_uring_sqe* s, void* v) {
                auto* x = static_cast<UringArgs*>(v);
                io_uring_prep_read(s, x->in, x->buf, x->len, x->off);
            },
            &a);
        if (r <= 0) die("io_uring read");
        a.off += static_cast<uint64_t>(r);
    }
    // Pass 2: IORING_OP_SPLICE file -> pipe (by reference) and pipe -> OUT (the kernel copies
    // into the page cache); both run on io-wq workers.
    for (a.off = 0; a.off < static_cast<uint64_t>(size);) {
        a.len = 1 << 16; // the default pipe capacity
        int r = uring_one(
            ring,
            [](io_uring_sqe* s, void* v) {
                auto* x = static_cast<UringArgs*>(v);
                io_uring_prep_splice(s, x->in, static_cast<int64_t>(x->off), x->pipe_wr, -1, x->len, 0);
            },
            &a);
        if (r <= 0) die("io_uring splice file -> pipe");
        a.len = static_cast<unsigned>(r);
        for (unsigned moved = 0; moved < a.len;) {
            int w = uring_one(
                ring,
                [](io_uring_sqe* s, void* v) {
                    auto* x = static_cast<UringArgs*>(v);
                    io_uring_prep_splice(s, x->pipe_rd, -1, x->out, -1, x->len, 0);
                },
                &a);
            if (w <= 0) die("io_uring splice pipe -> file");
            moved += static_cast<unsigned>(w);
            a.len -= static_cast<unsigned>(w);
        }
        a.off += static_cast<uint64_t>(r);
    }
    io_uring_queue_exit(&ring);
    return 0;
}

} // namespace

int run_fds(const char* path); // workload_fds.cpp

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "sendfile" && argc == 3) return run_sendfile(argv[2]);
    if (mode == "splice" && argc == 4) return run_splice(argv[2], argv[3]);
    if (mode == "uring" && argc == 4) return run_uring(argv[2], argv[3]);
    if (mode == "fds" && argc == 3) return run_fds(argv[2]);
    std::fprintf(stderr, "usage: workload sendfile FILE | splice FILE OUT | uring FILE OUT | fds FILE\n");
    return 2;
}
