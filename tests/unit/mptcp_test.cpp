#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>

#include "core/io/mptcp.hpp"
#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"

using namespace sluice;

// --mptcp's report (issue 16): every connection says what it runs and, when TCP, why.
TEST_CASE("the summary is on only when every connection runs MPTCP") {
    std::vector<ConnectionMptcp> all{{.stream = 0, .mptcp = true}, {.stream = 1, .mptcp = true}};
    CHECK(mptcp_summary(all) == "on");
    all.push_back({.stream = 2, .mptcp = false, .why = "the peer answered in plain TCP"});
    CHECK(mptcp_summary(all) == "fallback");
    CHECK(mptcp_line(all[0]) == "mptcp: control connection: MPTCP");
    CHECK(mptcp_line(all[2]) == "mptcp: data stream 2: plain TCP: the peer answered in plain TCP");
}

namespace {

bool mptcp_enabled() {
    std::FILE* f = std::fopen("/proc/sys/net/mptcp/enabled", "r");
    if (!f) return false;
    int v = 0;
    const bool ok = std::fscanf(f, "%d", &v) == 1 && v == 1;
    std::fclose(f);
    return ok;
}

// A connected pair over loopback: the listener and the client each MPTCP or TCP as asked.
struct Pair {
    UniqueFd client, server;
};
Pair connect_pair(bool listener_mptcp, bool client_mptcp) {
    UniqueFd l = listen_tcp("127.0.0.1", 0, {.backlog = 4, .mptcp = listener_mptcp});
    UniqueFd c = connect_tcp("127.0.0.1", local_port(l.get()), 10000, client_mptcp);
    UniqueFd s(::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
    REQUIRE(s);
    return {std::move(c), std::move(s)};
}

} // namespace

TEST_CASE("a connection says whether it runs MPTCP and, when not, why") {
    Pair plain = connect_pair(false, false);
    ConnectionMptcp not_asked = mptcp_of(plain.client.get(), 1, false, false);
    CHECK_FALSE(not_asked.mptcp);
    CHECK(not_asked.why.find("not asked") != std::string::npos);
    if (!mptcp_enabled()) return; // the rest needs net.mptcp.enabled=1
    Pair both = connect_pair(true, true);
    CHECK(mptcp_of(both.client.get(), 1, true, false).mptcp);
    CHECK(mptcp_of(both.server.get(), 1, true, true).mptcp);
    Pair to_tcp = connect_pair(false, true); // an MPTCP client, a TCP listener: it falls back
    ConnectionMptcp c = mptcp_of(to_tcp.client.get(), 2, true, false);
    CHECK_FALSE(c.mptcp);
    CHECK(c.why.find("answered in plain TCP") != std::string::npos);
    Pair from_tcp = connect_pair(true, false);
    ConnectionMptcp s = mptcp_of(from_tcp.server.get(), 0, true, true);
    CHECK_FALSE(s.mptcp);
    CHECK(s.why.find("connected in plain TCP") != std::string::npos);
}

TEST_CASE("handshake deadlines scale with the round trip above their floor") {
    CHECK(rtt_scaled_ms(10000, 0) == 10000);        // no measurement: the floor
    CHECK(rtt_scaled_ms(10000, 80'000) == 10000);   // 80 ms: 64 round trips are 5.1 s, under the floor
    CHECK(rtt_scaled_ms(10000, 600'000) == 38400);  // 600 ms (a satellite hop): 64 round trips
    CHECK(rtt_scaled_ms(10000, 4'000'000'000u) == 3'600'000); // bounded: an hour at most
    Pair p = connect_pair(false, false);
    CHECK(smoothed_rtt_us(p.server.get()) > 0); // an accepted connection's handshake measured it
}
