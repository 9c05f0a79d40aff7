// When a data stream's silence is excused (recv/paths/transfer_pulse.hpp): only while the
// transfer moved within the idle timeout, or the control thread works on what the sender
// waits for. Every time is given explicitly: nothing here depends on how fast the test runs.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>

#include "recv/paths/transfer_pulse.hpp"

using sluice::TransferPulse;
using namespace std::chrono_literals;

namespace {

constexpr int kIdleMs = 1000;

struct Counters {
    std::atomic<uint64_t> bytes{0}, files{0};
};

} // namespace

TEST_CASE("a transfer that stood still for the idle timeout excuses no stream") {
    Counters c;
    TransferPulse p(c.bytes, c.files);
    const auto t0 = TransferPulse::Clock::now(); // the pulse was made before: it last moved at or before t0
    CHECK_FALSE(p.excuses(kIdleMs, t0 + 1001ms));
    CHECK_FALSE(p.excuses(kIdleMs, t0 + 60s));
}

TEST_CASE("data on any stream, dated when it is first seen, excuses for one idle timeout") {
    Counters c;
    TransferPulse p(c.bytes, c.files);
    const auto t0 = TransferPulse::Clock::now();
    c.bytes += 4096; // another stream's block
    p.look(t0 + 10s); // the control thread's look
    CHECK(p.excuses(kIdleMs, t0 + 10s + 999ms));
    CHECK_FALSE(p.excuses(kIdleMs, t0 + 11s)); // nothing new since
    // A stream's own look counts as well: the first to see a change dates it.
    c.bytes += 1;
    CHECK(p.excuses(kIdleMs, t0 + 20s));
    CHECK(p.excuses(kIdleMs, t0 + 20s + 999ms));
    CHECK_FALSE(p.excuses(kIdleMs, t0 + 21s));
}

TEST_CASE("a completed file is movement too (a sink or a file finished by the control thread)") {
    Counters c;
    TransferPulse p(c.bytes, c.files);
    const auto t0 = TransferPulse::Clock::now();
    CHECK_FALSE(p.excuses(kIdleMs, t0 + 5s));
    c.files += 1;
    CHECK(p.excuses(kIdleMs, t0 + 6s));
}

TEST_CASE("a control frame excuses; the control thread's work excuses for as long as it lasts") {
    Counters c;
    TransferPulse p(c.bytes, c.files);
    const auto t0 = TransferPulse::Clock::now();
    p.moved(t0 + 5s);
    CHECK(p.excuses(kIdleMs, t0 + 5s + 999ms));
    CHECK_FALSE(p.excuses(kIdleMs, t0 + 6s + 1ms));
    p.working(); // a manifest page the sender waits to have acked
    CHECK(p.excuses(kIdleMs, t0 + 100s));
    p.answered(t0 + 100s);
    CHECK(p.excuses(kIdleMs, t0 + 100s + 999ms));
    CHECK_FALSE(p.excuses(kIdleMs, t0 + 101s + 1ms));
}

TEST_CASE("a movement dated late by one thread is not undone by an earlier date from another") {
    Counters c;
    TransferPulse p(c.bytes, c.files);
    const auto t0 = TransferPulse::Clock::now();
    p.moved(t0 + 30s);
    p.moved(t0 + 20s);
    CHECK(p.excuses(kIdleMs, t0 + 30s + 999ms));
}

TEST_CASE("bytes a stream received before its block is whole are movement (a slow link's trickle)") {
    Counters c;
    TransferPulse p(c.bytes, c.files);
    const auto t0 = TransferPulse::Clock::now();
    CHECK_FALSE(p.excuses(kIdleMs, t0 + 5s));
    p.arrived(16384); // one receive of a 2 MiB block: bytes_received moves only once it is whole
    CHECK(p.arrivals() == 16384);
    CHECK(p.excuses(kIdleMs, t0 + 6s));
    CHECK_FALSE(p.excuses(kIdleMs, t0 + 7s)); // nothing new since
    p.arrived(16384);
    p.look(t0 + 8s); // the control thread's look dates it
    CHECK(p.excuses(kIdleMs, t0 + 8s + 999ms));
}
