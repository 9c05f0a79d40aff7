// The ring's completion discipline: chains reach the kernel whole, results map to outcomes
// in one place, and nothing is in flight once a ring or a completion in flight is gone.
// Built with AddressSanitizer (tests/unit/meson.build, ring-asan).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "core/ring/ring.hpp"
#include "sluice/error.hpp"

using namespace sluice;
using Outcome = Completion::Outcome;

namespace {

struct SocketPair {
    int fd[2] = {-1, -1};
    SocketPair() { REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) == 0); }
    ~SocketPair() {
        ::close(fd[0]);
        ::close(fd[1]);
    }
    // What the socket holds now, without waiting.
    std::string queued(int i) {
        std::string out;
        char b[4096];
        for (;;) {
            ssize_t r = ::recv(fd[i], b, sizeof b, MSG_DONTWAIT);
            if (r <= 0) return out;
            out.append(b, static_cast<size_t>(r));
        }
    }
};

void wait_all(Ring& r) {
    while (r.in_flight()) r.wait();
}

} // namespace

TEST_CASE("a linked chain longer than the free SQ space reaches the kernel whole") {
    Ring ring(8);
    REQUIRE(ring.entries() == 8);
    SocketPair sp;
    static const char filler[] = "12345", letters[] = "abcde";
    Completion fill[5];
    for (int i = 0; i < 5; ++i) ring.send(fill[i], sp.fd[0], filler + i, 1, MSG_NOSIGNAL); // 5 of 8 entries queued
    // A chain of 6 whose head fails: if the ring split it to make room, the tail would run on
    // its own and its bytes would arrive. Whole, the tail is cancelled with the head.
    Completion head, tail[5];
    char buf[8];
    {
        auto chain = ring.chain(6);
        ring.recv(head, -1, buf, sizeof buf, 0);
        for (int i = 0; i < 5; ++i) ring.send(tail[i], sp.fd[0], letters + i, 1, MSG_NOSIGNAL);
    }
    wait_all(ring);
    for (auto& c : fill) CHECK(c.outcome() == Outcome::ok);
    CHECK(head.outcome() == Outcome::failed);
    CHECK(head.error() == EBADF);
    for (auto& c : tail) CHECK(c.outcome() == Outcome::cancelled);
    CHECK(sp.queued(1) == "12345");
}

TEST_CASE("a chain longer than the ring, or past what it reserved, fails loudly") {
    Ring ring(8);
    CHECK_THROWS_AS((void)ring.chain(9), Error);
    SocketPair sp;
    Completion a, b;
    {
        auto chain = ring.chain(1);
        ring.send(a, sp.fd[0], "x", 1, MSG_NOSIGNAL);
        CHECK_THROWS_AS(ring.send(b, sp.fd[0], "y", 1, MSG_NOSIGNAL), Error);
    }
    CHECK_FALSE(b.busy());
    wait_all(ring);
    CHECK(sp.queued(1) == "x");
}

TEST_CASE("completion results map to one outcome each") {
    Ring ring(8);
    SocketPair sp;
    char buf[16];

    SUBCASE("bytes") {
        Completion c;
        REQUIRE(::write(sp.fd[1], "hello", 5) == 5);
        ring.recv(c, sp.fd[0], buf, sizeof buf, 0);
        CHECK(&ring.wait() == &c);
        CHECK(c.outcome() == Outcome::ok);
        CHECK(c.result() == 5);
    }
    SUBCASE("EAGAIN on a socket is a retry") {
        Completion c;
        ring.recv(c, sp.fd[0], buf, sizeof buf, MSG_DONTWAIT);
        ring.wait();
        CHECK(c.outcome() == Outcome::retry);
    }
    SUBCASE("an errno is a failure, named once") {
        Completion c;
        int file = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        ring.recv(c, file, buf, sizeof buf, 0);
        ring.wait();
        ::close(file);
        CHECK(c.outcome() == Outcome::failed);
        CHECK(c.error() == ENOTSOCK);
        CHECK(c.result() == 0);
    }
    SUBCASE("a fired link timeout cancels the request it bounds") {
        Completion rx, timer;
        __kernel_timespec ts{0, 20'000'000};
        {
            auto chain = ring.chain(2);
            ring.recv(rx, sp.fd[0], buf, sizeof buf, 0);
            ring.link_timeout(timer, ts);
        }
        wait_all(ring);
        CHECK(rx.outcome() == Outcome::cancelled);
        CHECK(timer.outcome() == Outcome::ok);
    }
    SUBCASE("a link timeout outside a chain is refused") {
        Completion timer;
        __kernel_timespec ts{1, 0};
        CHECK_THROWS_AS(ring.link_timeout(timer, ts), Error);
    }
}

TEST_CASE("a ring destroyed with a receive in flight cancels it before it returns") {
    SocketPair sp;
    auto buf = std::make_unique<char[]>(4096);
    auto rx = std::make_unique<Completion>();
    auto ring = std::make_unique<Ring>(8);
    ring->recv(*rx, sp.fd[0], buf.get(), 4096, 0);
    ring->submit();
    ring.reset();
    CHECK_FALSE(rx->busy());
    CHECK(rx->outcome() == Outcome::cancelled);
    buf.reset(); // freed right after the ring, as a path's members are
    REQUIRE(::write(sp.fd[1], "late", 4) == 4);
    // Nothing took the bytes: no receive was left to copy them into the freed buffer.
    CHECK(sp.queued(0) == "late");
}

TEST_CASE("a completion destroyed in flight cancels before its memory goes; the ring lives on") {
    SocketPair sp;
    Ring ring(8);
    auto buf = std::make_unique<char[]>(4096);
    auto rx = std::make_unique<Completion>();
    ring.recv(*rx, sp.fd[0], buf.get(), 4096, 0);
    ring.submit();
    rx.reset(); // e.g. a path's completion declared after its ring, unwinding on an error
    buf.reset();
    CHECK(ring.in_flight() == 0);
    REQUIRE(::write(sp.fd[1], "late", 4) == 4);
    CHECK(sp.queued(0) == "late");
    // Still usable.
    Completion again;
    char b2[8];
    REQUIRE(::write(sp.fd[1], "ok", 2) == 2);
    ring.recv(again, sp.fd[0], b2, sizeof b2, 0);
    ring.wait();
    CHECK(again.result() == 2);
}
