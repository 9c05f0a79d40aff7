// The floor for serving one large file over HTTP on this kernel: a server that does nothing
// but sendfile. Every GET (whatever its path) is answered with FILE, whole, and the connection
// closed. No range, no cache check, no cork, no per-wake-up limit: the least user-space work
// there can be per byte, so that its CPU per GB is the kernel's TCP send path alone, and
// large.py can set sluice's and nginx's beside it (issue 15: "server CPU per GB at most 0.7x
// nginx's").
//   floor_send epoll  IP PORT FILE   one thread, epoll (edge-triggered), one sendfile of all
//                                    that is left per wake-up (the socket cuts it short)
//   floor_send thread IP PORT FILE   a thread per connection, blocking socket, one sendfile
//                                    of the whole file (the kernel sleeps inside it)
// Bench-only: trusts its clients (reads one request head of at most 4 KiB, never parses it).
#ifndef _GNU_SOURCE // meson may define it already
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "floor_common.h"

enum { kMaxConns = 4096, kHead = 4096 };

static int file_fd;
static off_t file_size;
static char head[160];
static int head_len;

struct conn {
    int fd;
    int got;      // request bytes read
    int answered; // head sent
    off_t off;    // file bytes sent
    char req[kHead];
};

static int head_complete(struct conn* c) { return memmem(c->req, (size_t)c->got, "\r\n\r\n", 4) != NULL; }

// epoll: returns 1 when the connection is finished (sent or failed), 0 when it waits.
static int step(void* conn) {
    struct conn* c = conn;
    while (!head_complete(c)) {
        if (c->got == kHead) return 1;
        ssize_t n = recv(c->fd, c->req + c->got, (size_t)(kHead - c->got), 0);
        if (n == 0) return 1;
        if (n < 0) return errno != EAGAIN;
        c->got += (int)n;
    }
    if (!c->answered) {
        if (send(c->fd, head, (size_t)head_len, MSG_MORE | MSG_NOSIGNAL) != head_len) return 1; // fits an empty socket
        c->answered = 1;
    }
    while (c->off < file_size) {
        ssize_t n = sendfile(c->fd, file_fd, &c->off, (size_t)(file_size - c->off));
        if (n < 0) return errno != EAGAIN;
        if (n == 0) return 1;
    }
    return 1;
}

static void* serve_blocking(void* arg) {
    struct conn* c = arg;
    while (!head_complete(c) && c->got < kHead) {
        ssize_t n = recv(c->fd, c->req + c->got, (size_t)(kHead - c->got), 0);
        if (n <= 0) goto out;
        c->got += (int)n;
    }
    if (send(c->fd, head, (size_t)head_len, MSG_MORE | MSG_NOSIGNAL) != head_len) goto out;
    while (c->off < file_size) // one call: the kernel sleeps inside it whenever the socket is full
        if (sendfile(c->fd, file_fd, &c->off, (size_t)(file_size - c->off)) <= 0) break;
out:
    close(c->fd);
    free(c);
    return NULL;
}

static int run_threads(int ls) {
    for (;;) {
        int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return 1;
        }
        struct conn* c = calloc(1, sizeof *c);
        c->fd = fd;
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 64 << 10);
        if (pthread_create(&t, &at, serve_blocking, c) != 0) {
            close(fd);
            free(c);
        }
        pthread_attr_destroy(&at);
    }
}

int main(int argc, char** argv) {
    if (argc != 5 || (strcmp(argv[1], "epoll") != 0 && strcmp(argv[1], "thread") != 0)) {
        fprintf(stderr, "usage: floor_send epoll|thread IP PORT FILE\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    file_fd = open(argv[4], O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (file_fd < 0 || fstat(file_fd, &st) != 0) {
        fprintf(stderr, "floor_send: cannot open %s: %s\n", argv[4], strerror(errno));
        return 1;
    }
    file_size = st.st_size;
    head_len = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\nConnection: close\r\n\r\n",
                        (long long)file_size);
    int thread = strcmp(argv[1], "thread") == 0;
    int ls = floor_listen("floor_send", argv[2], argv[3], thread ? 0 : SOCK_NONBLOCK);
    if (thread) return run_threads(ls);
    return floor_serve_epoll(ls, EPOLLIN | EPOLLOUT, sizeof(struct conn), 0, step);
}
