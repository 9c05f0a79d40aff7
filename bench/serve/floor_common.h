// What the two floors (floor_send.c, floor_put.c) share: a listening socket and one epoll
// loop over connections whose state begins with their fd. Bench-only.
#pragma once
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static int floor_listen(const char* prog, const char* ip, const char* port, int flags) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    if (s < 0 || inet_pton(AF_INET, ip, &a.sin_addr) != 1 || bind(s, (struct sockaddr*)&a, sizeof a) != 0 ||
        listen(s, 1024) != 0) {
        fprintf(stderr, "%s: cannot listen on %s:%s: %s\n", prog, ip, port, strerror(errno));
        exit(1);
    }
    return s;
}

// ls non-blocking. Each connection: conn_size bytes zeroed, its first member the fd, watched
// for `events` (edge-triggered); step() returns 1 when it is done (then closed and freed).
static int floor_serve_epoll(int ls, uint32_t events, size_t conn_size, int nodelay, int (*step)(void* conn)) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(ep, evs, 64, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return 1;
        for (int i = 0; i < n; i++) {
            int* c = evs[i].data.ptr; // the connection's fd, its first member
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof nodelay);
                    c = calloc(1, conn_size);
                    *c = fd;
                    struct epoll_event ce = {.events = events | EPOLLET | EPOLLRDHUP, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                }
                continue;
            }
            if (step(c)) {
                close(*c); // also leaves the epoll set
                free(c);
            }
        }
    }
}
