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

#include "floor_common.h"

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
static int step(void* conn) {
    struct conn* c = conn;
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
    // a 201 is one small segment: TCP_NODELAY, never held back for an ACK
    return floor_serve_epoll(floor_listen("floor_put", argv[1], argv[2], SOCK_NONBLOCK), EPOLLIN, sizeof(struct conn), 1,
                             step);
}
