#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "send/session/announce_window.hpp"
#include "sluice/error.hpp"

using namespace sluice;

TEST_CASE("the announce window flushes the page and waits for FILES_DONE once full") {
    AnnounceWindow w;
    w.set_limit(2);
    int flushes = 0;
    auto never = [] { return false; };
    w.admit([&] { ++flushes; }, never);
    w.admit([&] { ++flushes; }, never);
    CHECK(flushes == 0);
    CHECK(w.full());
    std::atomic<bool> flushed{false};
    // The receiver's answer comes only after the page went out: the flush must come first.
    std::thread receiver([&] {
        while (!flushed) std::this_thread::yield();
        w.done(1);
    });
    w.admit(
        [&] {
            ++flushes;
            flushed = true;
        },
        never);
    receiver.join();
    CHECK(flushes == 1);
    CHECK(w.peak() == 2);
    CHECK(w.full()); // 3 announced, 1 done
}

TEST_CASE("a FILES_DONE count that goes back or passes what was announced is a protocol error") {
    AnnounceWindow w;
    w.set_limit(10);
    for (int i = 0; i < 3; ++i) w.admit([] {}, [] { return false; });
    w.done(2);
    CHECK_THROWS_WITH(w.done(1), doctest::Contains("FILES_DONE reports 1 files complete after 2"));
    CHECK_THROWS_WITH(w.done(4), doctest::Contains("with 3 announced"));
    CHECK_NOTHROW(w.done(3));
}

TEST_CASE("no window: files are counted, never waited for") {
    AnnounceWindow w;
    for (int i = 0; i < 100; ++i) w.admit([] { FAIL("flushed without a window"); }, [] { return false; });
    CHECK_FALSE(w.full());
    CHECK(w.peak() == 100);
}

TEST_CASE("a stopped transfer ends the wait") {
    AnnounceWindow w;
    w.set_limit(1);
    w.admit([] {}, [] { return false; });
    std::atomic<bool> stop{false};
    std::thread t([&] {
        stop = true;
        w.stop();
    });
    w.admit([] {}, [&] { return stop.load(); });
    t.join();
    CHECK(stop);
}
