#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/io/send_backlog.hpp"
#include "core/io/unique_fd.hpp"

using namespace sluice;

namespace {

// A connected loopback TCP pair: [0] the client, [1] the accepted end.
struct LoopbackPair {
    UniqueFd client, server;
    LoopbackPair() {
        UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        REQUIRE(listener);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        socklen_t len = sizeof a;
        REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0);
        REQUIRE(::listen(listener.get(), 1) == 0);
        client = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        REQUIRE(::connect(client.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        server = UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        REQUIRE(server);
    }
};

} // namespace

// Issue 16 (h16s): on a long path a data stream's unsent bytes are bounded so the last blocks
// end together; on a LAN or loopback (under 2 ms) the kernel's default stays.
TEST_CASE("a data stream's unsent bytes are bounded from a 2 ms path on, and only there") {
    CHECK(send_backlog_for(0) == 0);       // no round trip known: nothing set
    CHECK(send_backlog_for(1999) == 0);    // a LAN
    CHECK(send_backlog_for(2000) == kSendBacklogBytes);
    CHECK(send_backlog_for(80'000) == 2u << 20);
}

TEST_CASE("the bound is set on the socket for a long path and read back; a short path leaves none") {
    LoopbackPair far, near;
    CHECK(send_backlog_of(far.client.get()) == 0); // the kernel's default: no bound
    CHECK(set_send_backlog(far.client.get(), 80'000) == kSendBacklogBytes);
    CHECK(send_backlog_of(far.client.get()) == kSendBacklogBytes);
    CHECK(set_send_backlog(near.client.get(), 50) == 0);
    CHECK(send_backlog_of(near.client.get()) == 0);
    CHECK(set_send_backlog(-1, 80'000) == 0); // refused (no socket): said as none, not thrown
}
