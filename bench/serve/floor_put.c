// The ceiling of the upload bench's client: a server that reads a PUT or POST, throws its body
// away and answers 201, with nothing stored. upload.py runs it beside sluice and nginx, so
// that what `ab -c 10` can drive on this machine at all is measured in the same call (issue
// 15: "uploads at ab -c 10: at least 5x the report's figures").
//   floor_put IP PORT     one thread, epoll; keep-alive when the request asks for it (ab -k
//                         sends HTTP/1.0 with Connection: Keep-Alive), else closed after 201
// Bench-only: trusts its clients (a head of at most 8 KiB, Content-Length as written).
#ifndef _GNU_SOURCE // meson may define it already
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kHead = 8192 };

struct conn {
    int fd;
    int got;          // bytes of the head (and what followed it) in req
    long long body;   // body bytes still to discard
    int in_body;
    int keep;
    char req[kHead];
};

static const char kKeep[] = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n";
static const char kClose[] = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

static long long content_length(const char* h, size_t len) {
    for (const char* p = h; p && p < h + len; p = memchr(p, '\n', (size_t)(h + len - p))) {
        if (*p == '\n') p++;
        if (strncasecmp(p, "content-length:", 15) == 0) return atoll(p + 15);
    }
    return 0;
}

// 1: the connection is done (closed by the client, an error, or answered without keep-alive).
static int step(struct conn* c) {
    for (;;) {
        if (c->in_body && c->body == 0) { // whole: answer, then the next request
            const char* a = c->keep ? kKeep : kClose;
            size_t n = c->keep ? sizeof kKeep - 1 : sizeof kClose - 1;
            if (send(c->fd, a, n, MSG_NOSIGNAL) != (ssize_t)n) return 1; // fits an idle socket
            if (!c->keep) return 1;
            c->in_body = 0;
            continue;
        }
        if (c->in_body) { // discard what is here, then read more
            char sink[65536];
            ssize_t n = recv(c->fd, sink, (size_t)(c->body < (long long)sizeof sink ? c->body : (long long)sizeof sink), 0);
            if (n == 0) return 1;
            if (n < 0) return errno != EAGAIN;
            c->body -= n;
            continue;
        }
        char* end = memmem(c->req, (size_t)c->got, "\r\n\r\n", 4);
        if (!end) {
            if (c->got == kHead) return 1;
            ssize_t n = recv(c->fd, c->req + c->got, (size_t)(kHead - c->got), 0);
            if (n == 0) return 1;
            if (n < 0) return errno != EAGAIN;
            c->got += (int)n;
            continue;
        }
        size_t head = (size_t)(end + 4 - c->req);
        c->body = content_length(c->req, head);
        c->keep = memmem(c->req, head, "eep-Alive", 9) != NULL || memmem(c->req, head, "eep-alive", 9) != NULL;
        c->in_body = 1;
        size_t extra = (size_t)c->got - head; // body bytes (or a pipelined request) read with the head
        size_t take = extra < (size_t)c->body ? extra : (size_t)c->body;
        c->body -= (long long)take;
        memmove(c->req, c->req + head + take, extra - take);
        c->got = (int)(extra - take);
    }
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: floor_put IP PORT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (ls < 0 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || bind(ls, (struct sockaddr*)&a, sizeof a) != 0 ||
        listen(ls, 1024) != 0) {
        fprintf(stderr, "floor_put: cannot listen on %s:%s: %s\n", argv[1], argv[2], strerror(errno));
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(ep, evs, 64, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return 1;
        for (int i = 0; i < n; i++) {
            struct conn* c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    int nd = 1; // a 201 is one small segment: never held back for an ACK
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nd, sizeof nd);
                    c = calloc(1, sizeof *c);
                    c->fd = fd;
                    struct epoll_event ce = {.events = EPOLLIN | EPOLLET | EPOLLRDHUP, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                }
                continue;
            }
            if (step(c)) {
                close(c->fd);
                free(c);
            }
        }
    }
}
