// The work queue's tail (send/plan/work_queue.hpp): once every planned item is queued, a stream
// with nothing to carry ends, and exactly one stays for RESENDs: the one that finished carrying
// last, or one still carrying. Nothing here waits on time: a stream that stays is seen by its
// first wake (every 1 ms) calling check(), which throws.
#include <doctest/doctest.h>

#include <chrono>

#include "send/plan/work_queue.hpp"

using sluice::WorkItem;
using sluice::WorkQueue;
using namespace std::chrono_literals;

namespace {

enum class Outcome { took, left, stayed, closed };
struct Stayed {};

// Stream i waits for work; stays_below: the streams that take work to the end (0: unknown yet).
Outcome wait(WorkQueue& q, size_t i, unsigned stays_below) {
    bool left = false;
    try {
        auto item = q.pop_checking(i, 1ms, [] { throw Stayed{}; }, [&] { return stays_below; }, left);
        if (item) return Outcome::took;
        return left ? Outcome::left : Outcome::closed;
    } catch (const Stayed&) {
        return Outcome::stayed;
    }
}

void with_items(WorkQueue& q, int n) {
    for (int k = 0; k < n; ++k) q.push(WorkItem{});
}

// A queue with `takers` streams and `items` queued.
struct Queue : WorkQueue {
    Queue(size_t takers, int items) {
        set_takers(takers);
        with_items(*this, items);
    }
};

} // namespace

TEST_CASE("before every planned item is queued, a stream with nothing to carry waits") {
    Queue q(3, 1);
    CHECK(q.try_pop(0));
    CHECK(wait(q, 1, 3) == Outcome::stayed);
    CHECK(wait(q, 0, 3) == Outcome::stayed);
    q.close();
    CHECK(wait(q, 1, 3) == Outcome::closed);
}

TEST_CASE("at the tail the streams that carried nothing end, the one that carried stays") {
    Queue q(4, 1);
    CHECK(q.try_pop(2));
    q.planned_all();
    CHECK(wait(q, 0, 4) == Outcome::left); // stream 2 still carries: it will stay
    CHECK(wait(q, 2, 4) == Outcome::stayed);
    CHECK(wait(q, 1, 4) == Outcome::left);
    CHECK(wait(q, 3, 4) == Outcome::left);
    // A RESEND after the tail goes to the stream that stayed, which stays again.
    with_items(q, 1);
    CHECK(wait(q, 2, 4) == Outcome::took);
    CHECK(wait(q, 2, 4) == Outcome::stayed);
}

TEST_CASE("of the streams that carried, the one that finished last stays") {
    Queue q(3, 3);
    CHECK(q.try_pop(0));
    CHECK(q.try_pop(1));
    CHECK(q.try_pop(2));
    CHECK(wait(q, 1, 3) == Outcome::stayed); // not the tail yet
    CHECK(wait(q, 2, 3) == Outcome::stayed); // finished after 1
    q.planned_all();
    CHECK(wait(q, 1, 3) == Outcome::left);   // 0 still carries
    CHECK(wait(q, 0, 3) == Outcome::stayed); // finished last
    CHECK(wait(q, 2, 3) == Outcome::left);   // 0 finished after it
}

TEST_CASE("queued work is taken before any stream ends") {
    Queue q(2, 2);
    q.planned_all();
    CHECK(wait(q, 0, 2) == Outcome::took);
    CHECK(wait(q, 1, 2) == Outcome::took);
    CHECK(wait(q, 1, 2) == Outcome::left); // 0 carries
    CHECK(wait(q, 0, 2) == Outcome::stayed);
}

TEST_CASE("a transfer that carried nothing keeps every stream until the end") {
    Queue q(3, 0);
    q.planned_all();
    for (size_t i = 0; i < 3; ++i) CHECK(wait(q, i, 3) == Outcome::stayed);
}

TEST_CASE("--streams auto: none ends before the count settles; past it a stream counts for nothing") {
    Queue q(4, 2);
    CHECK(q.try_pop(0));
    CHECK(q.try_pop(3));
    q.planned_all();
    CHECK(wait(q, 1, 0) == Outcome::stayed); // still searching
    // Settled on 2: stream 3 is retired and ends once done, so stream 0 stays although 3 still
    // carries and finishes after it; a waiting stream past the count ends.
    CHECK(wait(q, 0, 2) == Outcome::stayed);
    q.leave(3);
    CHECK(wait(q, 0, 2) == Outcome::stayed);
    CHECK(wait(q, 1, 2) == Outcome::left);
    CHECK(wait(q, 2, 2) == Outcome::left);
}
