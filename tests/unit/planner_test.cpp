#include <doctest/doctest.h>

#include <algorithm>

#include "send/plan/planner.hpp"
#include "sluice/sluice.hpp"

using namespace sluice;

namespace {

uint64_t total(const std::vector<WorkItem>& items) {
    uint64_t t = 0;
    for (auto& w : items)
        for (auto& s : w.segments) t += s.length;
    return t;
}

} // namespace

TEST_CASE("a large file is cut into block-sized segments with a short tail") {
    Planner p(1 << 20);
    SourceFile f{0, (5 << 20) + 123, 0, "/x", "x"};
    std::vector<WorkItem> out;
    p.add(f, {}, out);
    p.flush(out);
    REQUIRE(out.size() == 6);
    for (int i = 0; i < 5; ++i) {
        REQUIRE(out[i].segments.size() == 1);
        CHECK(out[i].segments[0].offset == uint64_t(i) << 20);
        CHECK(out[i].segments[0].length == 1u << 20);
    }
    CHECK(out[5].segments[0].length == 123);
    CHECK(total(out) == f.size);
}

TEST_CASE("small files are batched up to a block") {
    Planner p(64 * 1024);
    std::vector<SourceFile> files;
    for (uint64_t i = 0; i < 100; ++i) files.push_back({i, 1000, 0, "/f", "f"});
    std::vector<WorkItem> out;
    for (auto& f : files) p.add(f, {}, out);
    p.flush(out);
    CHECK(total(out) == 100 * 1000);
    CHECK(out.size() == 2); // 66 files reach 64 KiB, then the remaining 34
    CHECK(out[0].segments.size() == 66);
}

TEST_CASE("batches are capped in file count") {
    Planner p(64 << 20);
    std::vector<SourceFile> files;
    for (uint64_t i = 0; i < 2000; ++i) files.push_back({i, 1, 0, "/f", "f"});
    std::vector<WorkItem> out;
    for (auto& f : files) p.add(f, {}, out);
    p.flush(out);
    for (auto& w : out) CHECK(w.segments.size() <= Planner::kMaxFilesPerBatch);
    CHECK(total(out) == 2000);
}

TEST_CASE("empty files produce no work") {
    Planner p(1 << 20);
    SourceFile f{0, 0, 0, "/x", "x"};
    std::vector<WorkItem> out;
    p.add(f, {}, out);
    p.flush(out);
    CHECK(out.empty());
}

TEST_CASE("blocks the receiver already verified are skipped (resume)") {
    Planner p(1 << 20);
    SourceFile f{3, 4 << 20, 0, "/x", "x"};
    std::vector<WorkItem> out;
    p.add(f, {{3, 0, 2 << 20}, {7, 2 << 20, 1 << 20}}, out); // second range is another file's
    p.flush(out);
    CHECK(total(out) == 2 << 20);
    CHECK(p.skipped_bytes() == 2 << 20);
    CHECK(out[0].segments[0].offset == 2 << 20);
}

TEST_CASE("ranges verified with another block size: exactly the rest is sent, nothing twice") {
    // An interrupted run with 3 MiB blocks verified [0, 21 MiB) and [24, 27 MiB); this run
    // uses 8 MiB blocks. Every byte not verified is planned once and no segment overlaps a
    // verified range (the receiver refuses such a block).
    const uint64_t M = 1 << 20;
    Planner p(8 * M);
    SourceFile f{0, 40 * M + 5, 0, "/x", "x"};
    std::vector<wire::ByteRange> have{{0, 24 * M, 3 * M}, {0, 0, 21 * M}, {0, 25 * M, M}}; // unsorted, one inside another
    std::vector<WorkItem> out;
    p.add(f, have, out);
    p.flush(out);
    std::vector<std::pair<uint64_t, uint64_t>> sent;
    for (auto& w : out)
        for (auto& s : w.segments) {
            CHECK(s.length <= 8 * M);
            CHECK(s.offset / (8 * M) == (s.offset + s.length - 1) / (8 * M)); // within one block cell
            sent.emplace_back(s.offset, s.offset + s.length);
        }
    std::sort(sent.begin(), sent.end());
    REQUIRE(sent.size() == 4);
    CHECK(sent[0] == std::make_pair(21 * M, 24 * M));
    CHECK(sent[1] == std::make_pair(27 * M, 32 * M));
    CHECK(sent[2] == std::make_pair(32 * M, 40 * M));
    CHECK(sent[3] == std::make_pair(40 * M, 40 * M + 5));
    CHECK(total(out) + p.skipped_bytes() == f.size);
}
