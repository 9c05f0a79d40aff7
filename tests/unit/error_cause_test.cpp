// Causes are set where the fault is detected, so callers decide on them instead of the text.
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/wire/frame_io.hpp"
#include "sluice/error.hpp"

using namespace sluice;

namespace {

struct SocketPair {
    UniqueFd a, b;
    SocketPair() {
        int fds[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        a.reset(fds[0]);
        b.reset(fds[1]);
    }
};

// The Error a call throws, or none.
template <class F> Error error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    FAIL("no Error thrown");
    return Error(ErrorCode::internal, "unreachable");
}

} // namespace

TEST_CASE("a peer that closes the connection is peer_closed, by value") {
    SocketPair s;
    const unsigned char two[2] = {1, 2};
    send_all(s.b.get(), two, "test");
    s.b.reset();
    std::array<unsigned char, 4> buf{};
    Error e = error_of([&] { recv_exact(s.a.get(), buf, "control connection"); });
    CHECK(e.code() == ErrorCode::network);
    CHECK(e.cause() == ErrorCause::peer_closed);
    CHECK(std::string(e.what()).find("control connection") == 0);
}

TEST_CASE("a frame cut short by a closed peer is peer_closed") {
    SocketPair s;
    s.b.reset();
    Error e = error_of([&] { read_frame(s.a.get(), "control connection"); });
    CHECK(e.cause() == ErrorCause::peer_closed);
}

TEST_CASE("a silent peer past the socket timeout is timed_out") {
    SocketPair s;
    set_io_timeout(s.a.get(), 50);
    std::array<unsigned char, 4> buf{};
    Error e = error_of([&] { recv_exact(s.a.get(), buf, "control connection"); });
    CHECK(e.code() == ErrorCode::network);
    CHECK(e.cause() == ErrorCause::timed_out);
}

TEST_CASE("a peer that stops reading is timed_out on the sending side") {
    SocketPair s;
    set_io_timeout(s.a.get(), 50);
    int small = 4096;
    ::setsockopt(s.a.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    std::vector<unsigned char> lots(8 << 20);
    Error e = error_of([&] { send_all(s.a.get(), lots, "ending the transfer"); });
    CHECK(e.cause() == ErrorCause::timed_out);
}

TEST_CASE("writing to a gone peer is peer_reset") {
    SocketPair s;
    s.b.reset();
    const unsigned char one[1] = {1};
    Error e = error_of([&] { send_all(s.a.get(), one, "aborting"); });
    CHECK(e.cause() == ErrorCause::peer_reset);
}

TEST_CASE("errno maps to a cause in one place; other errors have none") {
    CHECK(cause_of_errno(ETIMEDOUT) == ErrorCause::timed_out);
    CHECK(cause_of_errno(ECONNRESET) == ErrorCause::peer_reset);
    CHECK(cause_of_errno(EPIPE) == ErrorCause::peer_reset);
    CHECK(cause_of_errno(ENOSPC) == ErrorCause::none);
    Error e = error_of([] { throw_errno(ErrorCode::destination, "cannot write 'f'", ENOSPC); });
    CHECK(e.cause() == ErrorCause::none);
    CHECK(Error(ErrorCode::usage, "x").cause() == ErrorCause::none); // the two-argument form stays
    CHECK(std::string(error_cause_name(ErrorCause::peer_closed)) == "peer_closed");
    CHECK(std::string(error_cause_name(ErrorCause::timed_out)) == "timed_out");
}
