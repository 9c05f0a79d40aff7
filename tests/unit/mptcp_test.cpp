#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <optional>
#include <vector>

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

TEST_CASE("an accepted connection's handshake measured its round trip") {
    Pair p = connect_pair(false, false);
    CHECK(smoothed_rtt_us(p.server.get()) > 0);
}

namespace {

// Writes n bytes on `from` and reads them all on `to` (blocking; loopback).
void move_bytes(int from, int to, size_t n) {
    std::vector<unsigned char> buf(n, 0x5a);
    send_all(from, buf, "test send");
    recv_exact(to, buf, "test recv");
}

} // namespace

// TCP_INFO on an MPTCP socket is its first subflow's: the figures come from every subflow
// (MPTCP_TCPINFO) instead, and say how many they sum.
TEST_CASE("an MPTCP connection's figures come from its subflows, a TCP one's from TCP_INFO") {
    Pair plain = connect_pair(false, false);
    move_bytes(plain.client.get(), plain.server.get(), 1 << 20);
    CHECK_FALSE(mptcp_stream_tcp(plain.client.get(), 1).has_value());
    CHECK_FALSE(mptcp_bytes_acked(plain.client.get()).has_value());
    CHECK_FALSE(runs_mptcp(plain.client.get()));
    StreamTcp t = stream_tcp(plain.client.get(), 1);
    CHECK(t.subflows == 0);
    CHECK(t.bytes_sent >= (1u << 20));
    if (!mptcp_enabled()) return; // the rest needs net.mptcp.enabled=1
    Pair both = connect_pair(true, true);
    move_bytes(both.client.get(), both.server.get(), 1 << 20);
    CHECK(runs_mptcp(both.client.get()));
    StreamTcp m = stream_tcp(both.client.get(), 2);
    CHECK(m.stream == 2);
    CHECK(m.subflows == 1); // loopback has one path: one subflow
    CHECK(m.bytes_sent >= (1u << 20));
    CHECK(m.mss > 0);
    // Acknowledged at the MPTCP level (or by the subflows): some of it, never more than sent.
    std::optional<uint64_t> acked = mptcp_bytes_acked(both.client.get());
    REQUIRE(acked.has_value());
    CHECK(*acked > 0);
    CHECK(*acked <= m.bytes_sent + 1);
    CHECK(bytes_acked(both.client.get()) == *acked);
    CHECK(bytes_delivered(both.client.get()) == *acked); // the pacer's figure: MPTCP's own counter
    // A client that fell back to TCP is judged by TCP_INFO, which then describes it whole.
    Pair fell_back = connect_pair(false, true);
    move_bytes(fell_back.client.get(), fell_back.server.get(), 64 << 10);
    CHECK_FALSE(mptcp_stream_tcp(fell_back.client.get(), 1).has_value());
    CHECK(stream_tcp(fell_back.client.get(), 1).subflows == 0);
}

// The pacer's aggregate (issue 16): what the peer received, SACKed or acknowledged, in
// segments x MSS. Every segment is at most one MSS, so it is never below what was acknowledged
// before it was read; a descriptor without TCP_INFO reads 0.
TEST_CASE("bytes delivered cover the bytes acknowledged") {
    Pair plain = connect_pair(false, false);
    move_bytes(plain.client.get(), plain.server.get(), 1 << 20);
    const uint64_t acked = bytes_acked(plain.client.get());
    CHECK(bytes_delivered(plain.client.get()) >= acked);
    CHECK(bytes_delivered(-1) == 0);
}

TEST_CASE("window limits leave MPTCP streams out and say so") {
    std::vector<StreamTcp> streams{{.stream = 1, .rtt_us = 100, .busy_us = 1000, .sndbuf_limited_us = 900, .subflows = 2},
                                   {.stream = 2, .rtt_us = 100, .busy_us = 1000, .sndbuf_limited_us = 900, .subflows = 1}};
    std::string unjudged;
    CHECK(send_window_limits({-1, -1}, streams, &unjudged).empty());
    CHECK(unjudged.find("data streams 1, 2 run MPTCP") != std::string::npos);
    streams.resize(1);
    streams[0].subflows = 0; // plain TCP, with no buffer to read (fd -1): judged, nothing found
    CHECK(send_window_limits({-1}, streams, &unjudged).empty());
    CHECK(unjudged.empty());
}

// The pacer's start-up test (issue 16): a BBR connection that has had a few acknowledgements
// (its gains are set on the first) is in start-up: 64 KiB sent by an application that waits
// is no full pipe. Another algorithm, or a descriptor without TCP, never is.
TEST_CASE("a new BBR connection is in start-up; a CUBIC one and a bad descriptor are not") {
    Pair p = connect_pair(false, false);
    CHECK_FALSE(in_bbr_startup(-1));
    set_congestion_control(p.client.get(), "cubic");
    CHECK_FALSE(in_bbr_startup(p.client.get()));
    try {
        set_congestion_control(p.client.get(), "bbr");
    } catch (const std::exception& e) { // the module may be absent
        MESSAGE("bbr not available: " << e.what());
        return;
    }
    move_bytes(p.client.get(), p.server.get(), 64 << 10);
    CHECK(in_bbr_startup(p.client.get()));
}
