#include <doctest/doctest.h>

#include <chrono>

#include "send/plan/work_queue.hpp"

using namespace sluice;

// Issue 16 (h16s): on a long path the end of a transfer goes out in pieces, so streams that
// are free take the rest of the last blocks instead of waiting on the slowest.
namespace {
constexpr uint64_t kBlock = 8 << 20, kPiece = kBlock / kTailPieces;

// The next item for stream 0, waiting (none of the streams ends at the tail: stays_below 0).
std::optional<WorkItem> pop(WorkQueue& q) {
    bool left = false;
    return q.pop_checking(0, std::chrono::milliseconds(1000), [] {}, [] { return size_t{0}; }, left);
}
// `blocks` whole blocks of f, each held as the planner's queued segments are.
void fill(WorkQueue& q, const SourceFile& f, unsigned blocks) {
    for (unsigned i = 0; i < blocks; ++i) {
        f.hold();
        q.push(WorkItem{{Segment{&f, i * kBlock, kBlock}}});
    }
}
// A file of `blocks` whole blocks queued, the end in pieces from `tail` items left.
struct Queued {
    SourceFile f;
    WorkQueue q;
    Queued(unsigned blocks, size_t tail) {
        f.size = blocks * kBlock;
        q.split_tail(tail, kPiece);
        fill(q, f, blocks);
    }
};
} // namespace

TEST_CASE("the last blocks are handed out in pieces once no more will come, covering each byte once") {
    Queued six(6, 4);
    SourceFile& f = six.f;
    WorkQueue& q = six.q;
    // Not all planned: more may come (the manifest goes on), whole blocks as before.
    auto a = q.try_pop(0);
    REQUIRE(a);
    CHECK(a->segments[0].length == kBlock);
    q.planned_all();
    // Five left, more than 4: whole.
    auto b = pop(q);
    REQUIRE(b);
    CHECK(b->segments[0].length == kBlock);
    // Four left: pieces, in order, each byte once, each piece holding the file once.
    uint64_t next = 2 * kBlock, pieces = 0;
    while (auto w = q.try_pop(0)) {
        REQUIRE(w->segments.size() == 1);
        CHECK(w->segments[0].offset == next);
        CHECK(w->segments[0].length == kPiece);
        next += w->segments[0].length;
        ++pieces;
        f.let_go(); // the stream that sent it
    }
    CHECK(next == 6 * kBlock);
    CHECK_FALSE(q.try_pop(0)); // planned is not closed: pop would wait for a RESEND's item
    q.close();
    CHECK(pieces == 4 * kTailPieces);
    CHECK(q.pieces() == 4 * kTailPieces - 4); // the last piece of each block is the block's own item
    f.let_go(), f.let_go();                   // a and b
    CHECK_FALSE(f.held());
}

TEST_CASE("off (a short path), or an item of many segments or no longer than a piece: taken whole") {
    SourceFile f;
    f.size = 4 * kBlock;
    SUBCASE("off") {
        WorkQueue q;
        fill(q, f, 2);
        q.close();
        CHECK(pop(q)->segments[0].length == kBlock);
        CHECK(q.pieces() == 0);
    }
    SUBCASE("a batch of small files, and a segment of one piece") {
        WorkQueue q;
        q.split_tail(16, kPiece);
        q.push(WorkItem{{Segment{&f, 0, kPiece * 2}, Segment{&f, kPiece * 2, kPiece * 2}}});
        q.push(WorkItem{{Segment{&f, kPiece * 4, kPiece}}});
        q.close();
        CHECK(pop(q)->segments.size() == 2);
        CHECK(pop(q)->segments[0].length == kPiece);
        CHECK(q.pieces() == 0);
    }
    SUBCASE("a block's last part shorter than a piece (a file's end) stays whole") {
        WorkQueue q;
        q.split_tail(16, kPiece);
        q.push(WorkItem{{Segment{&f, 0, kPiece + 100}}});
        q.close();
        auto w = pop(q);
        CHECK(w->segments[0].length == kPiece);
        w = pop(q);
        CHECK(w->segments[0].offset == kPiece);
        CHECK(w->segments[0].length == 100);
        CHECK_FALSE(pop(q));
    }
}

TEST_CASE("splitting() says the piece once the first was handed out: the streams then bound their backlog") {
    Queued two(2, 1);
    WorkQueue& q = two.q;
    q.planned_all();
    CHECK(q.try_pop(0)->segments[0].length == kBlock); // two left, more than one: whole
    CHECK(q.splitting() == 0);
    CHECK(q.try_pop(0)->segments[0].length == kPiece);
    CHECK(q.splitting() == kPiece);
}
