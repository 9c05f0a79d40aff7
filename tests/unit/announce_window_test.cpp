#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "send/session/announce_window.hpp"
#include "send/session/source_records.hpp"
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

namespace {
SourceFile record(uint64_t id) { return SourceFile{id, 1, 0, "/src/f" + std::to_string(id), "f" + std::to_string(id)}; }
} // namespace

TEST_CASE("the sender frees records below FILES_DONE's mark only once nothing holds them") {
    SourceRecords r;
    const SourceFile& a = r.add(record(1));
    r.add(record(2));
    r.add(record(5));
    r.sent_below(6);
    a.hold(); // a queued segment, say
    r.complete_below(3);
    CHECK(r.freed() == 1);  // 2 only: 1 is held
    CHECK(r.contains(1));
    CHECK_FALSE(r.contains(2));
    CHECK(r.hold(2) == nullptr); // a RESEND of it finds nothing
    a.let_go();
    r.complete_below(3); // the held one is tried again
    CHECK(r.freed() == 2);
    CHECK(r.contains(5));
    CHECK(r.count() == 3);
    CHECK(r.held_peak() == 3);
}

TEST_CASE("a FILES_DONE mark that goes back or passes the entries sent is a protocol error") {
    SourceRecords r;
    r.add(record(0));
    r.sent_below(10);
    CHECK_THROWS_WITH(r.complete_below(11), doctest::Contains("only entries below 10 were sent"));
    r.complete_below(4);
    CHECK_THROWS_WITH(r.complete_below(3), doctest::Contains("after it reported below 4"));
    CHECK_THROWS_WITH(r.complete_below(UINT64_MAX), doctest::Contains("were sent"));
    CHECK_FALSE(r.contains(0));
}
