#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "send/session/stream_opener.hpp"
#include "sluice/error.hpp"

using namespace sluice;

// Issue 16: the data streams open in the background and each is used as soon as it is open.
// No timing: every wait below ends by an event the test controls.

namespace {
const std::function<bool()> kNever = [] { return false; };

// Opens hold until the test lets them go, one index at a time.
struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    unsigned open_up_to = 0; // opens with index <= this may finish
    void let(unsigned i) {
        {
            std::lock_guard lk(mu);
            open_up_to = i;
        }
        cv.notify_all();
    }
    void pass(unsigned i) {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return i <= open_up_to; });
    }
};
} // namespace

TEST_CASE("a stream is ready once its own open is done, before the others") {
    Gate gate;
    StreamOpener o;
    o.start(16, 8, [&](unsigned i) { gate.pass(i); }, kNever);
    gate.let(1);
    CHECK(o.await(1, kNever)); // streams 2..16 are still held open
    gate.let(16);
    CHECK(o.await_all(kNever));
    o.join();
    CHECK(o.timeline().find("16 of 16") != std::string::npos);
}

TEST_CASE("a failed open is thrown to its stream and to await_all; the ones not started are abandoned") {
    StreamOpener o;
    o.start(32, 1, [](unsigned i) {
        if (i == 3) throw Error(ErrorCode::auth, "bad token on stream 3");
    }, kNever);
    CHECK(o.await(2, kNever));
    CHECK_THROWS_AS(o.await(3, kNever), Error);
    CHECK_FALSE(o.await(32, kNever)); // one at a time: never started after stream 3 failed
    CHECK_THROWS_AS(o.await_all(kNever), Error);
    o.join();
}

TEST_CASE("a stream reset during its open is opened again, once, after the others") {
    std::vector<unsigned> order;
    std::mutex mu;
    std::atomic<int> resets{0};
    StreamOpener o;
    o.start(4, 1, [&](unsigned i) {
        std::lock_guard lk(mu);
        order.push_back(i);
        if (i == 2 && resets++ == 0) throw Error(ErrorCode::network, "reset", ErrorCause::peer_reset);
    }, kNever);
    CHECK(o.await_all(kNever));
    o.join();
    CHECK(order == std::vector<unsigned>{1, 2, 3, 4, 2});
}

TEST_CASE("a transfer that stops releases the streams still waiting for their open") {
    Gate gate;
    std::atomic<bool> stopped{false};
    StreamOpener o;
    o.start(4, 4, [&](unsigned i) { gate.pass(i); }, [&] { return stopped.load(); });
    stopped = true;
    CHECK_FALSE(o.await(4, [&] { return stopped.load(); }));
    gate.let(4); // the opens in flight end (a session shuts their sockets down)
    o.join();
}
