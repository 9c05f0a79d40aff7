// Issue 17's pure parts: the sparse codec round trip and its refusals, the planner over data
// extents, merging extents under the limit, the update frames' round trip and refusals.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/wire/codec.hpp"
#include "send/plan/planner.hpp"
#include "send/plan/sparse_extents.hpp"

using namespace sluice;

namespace {

wire::ManifestPage decode_page(const wire::Bytes& frame) {
    return wire::decode_manifest(wire::Span(frame).subspan(wire::kFrameHeaderBytes));
}

wire::ManifestPage sparse_page(uint64_t size, std::vector<wire::Extent> x) {
    wire::ManifestEntry e;
    e.size = size;
    e.path = "f";
    e.sparse = true;
    e.data_extents = std::move(x);
    return wire::ManifestPage{.seq = 0, .entries = {e}};
}

} // namespace

TEST_CASE("a sparse entry's extents survive the codec and bad ones are refused") {
    wire::Bytes b;
    wire::encode_manifest(b, sparse_page(1 << 20, {{0, 4096}, {65536, 8192}}));
    auto p = decode_page(b);
    REQUIRE(p.entries.size() == 1);
    CHECK(p.entries[0].sparse);
    REQUIRE(p.entries[0].data_extents.size() == 2);
    CHECK(p.entries[0].data_extents[1].offset == 65536);
    for (auto bad : {std::vector<wire::Extent>{{0, 0}}, {{4096, 4096}, {0, 4096}}, {{0, 8192}, {4096, 4096}},
                     {{(1 << 20) - 4096, 8192}}}) {
        wire::Bytes o;
        wire::encode_manifest(o, sparse_page(1 << 20, bad));
        CHECK_THROWS_AS(decode_page(o), Error);
    }
}

TEST_CASE("a sparse file is planned over its data extents only") {
    Planner p(1 << 20);
    SourceFile f{0, 64 << 20, 0, "/x", "x"};
    f.sparse = true;
    f.extents = {{4096, (2 << 20)}, {40 << 20, 4096}};
    std::vector<WorkItem> out;
    p.add(f, {}, out);
    p.flush(out);
    uint64_t bytes = 0;
    for (auto& w : out)
        for (auto& s : w.segments) {
            bytes += s.length;
            // Cut at block multiples inside the extent.
            CHECK((s.offset % (1 << 20) == 0 || s.offset == 4096 || s.offset == (40u << 20)));
        }
    CHECK(bytes == (2 << 20) + 4096);
}

TEST_CASE("too many extents are merged over the shortest holes") {
    std::vector<wire::Extent> x;
    for (uint64_t i = 0; i < 100; ++i) x.push_back({i * (i % 2 ? 65536 : 8192) + i * 1000000, 4096});
    std::sort(x.begin(), x.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
    merge_extents(x, 10);
    CHECK(x.size() <= 10);
    for (size_t i = 1; i < x.size(); ++i) CHECK(x[i].offset > x[i - 1].offset + x[i - 1].length);
}

TEST_CASE("update frames round trip and bad ones are refused") {
    wire::Bytes b;
    wire::encode_reuse(b, wire::Reuse{.file_id = 3, .ranges = {{0, 8 << 20}, {16 << 20, 4096}}});
    auto r = wire::decode_reuse(wire::Span(b).subspan(wire::kFrameHeaderBytes));
    CHECK(r.file_id == 3);
    CHECK(r.ranges.size() == 2);
    wire::Bytes o;
    wire::encode_reuse(o, wire::Reuse{.file_id = 3, .ranges = {{0, 8192}, {4096, 4096}}});
    CHECK_THROWS_AS(wire::decode_reuse(wire::Span(o).subspan(wire::kFrameHeaderBytes)), Error);
    wire::Bytes u;
    wire::encode_update_params(u, wire::UpdateParams{.block_size = 1000, .checksum = true});
    CHECK_THROWS_AS(wire::decode_update_params(wire::Span(u).subspan(wire::kFrameHeaderBytes)), Error);
    wire::Bytes s;
    wire::encode_block_sums(s, wire::BlockSums{.file_id = 1, .old_size = 10, .sums = {1, 2}});
    auto d = wire::decode_block_sums(wire::Span(s).subspan(wire::kFrameHeaderBytes));
    CHECK(d.sums.size() == 2);
}
