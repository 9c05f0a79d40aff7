#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/wire/codec.hpp"
#include "core/wire/data_parser.hpp"

using namespace sluice;
using namespace sluice::wire;

namespace {

struct Recorder : DataFrameHandler {
    std::vector<BlockPrefix> blocks;
    std::vector<std::string> data;
    int ends = 0;
    bool stream_ended = false;
    void block_begin(const BlockPrefix& p, uint32_t) override {
        blocks.push_back(p);
        data.emplace_back();
    }
    void block_data(std::span<const unsigned char> d) override { data.back().append(d.begin(), d.end()); }
    void block_end() override { ++ends; }
    void stream_end(const StreamEnd&) override { stream_ended = true; }
};

Bytes stream_of(const std::vector<std::string>& blocks) {
    Bytes out;
    uint64_t off = 0;
    for (const auto& b : blocks) {
        unsigned char pre[32];
        encode_block_prefix(pre, {1, off, 42}, static_cast<uint32_t>(b.size()));
        out.insert(out.end(), pre, pre + 32);
        out.insert(out.end(), b.begin(), b.end());
        off += b.size();
    }
    encode_stream_end(out, {blocks.size(), off});
    return out;
}

} // namespace

TEST_CASE("parser yields the same events however the bytes are split") {
    Bytes s = stream_of({"hello", std::string(1000, 'x'), "z"});
    for (size_t piece : {size_t{1}, size_t{3}, size_t{31}, size_t{32}, size_t{33}, s.size()}) {
        CAPTURE(piece);
        Recorder r;
        DataFrameParser p;
        for (size_t i = 0; i < s.size(); i += piece) p.feed(Span(s).subspan(i, std::min(piece, s.size() - i)), r);
        REQUIRE(r.blocks.size() == 3);
        CHECK(r.data[0] == "hello");
        CHECK(r.data[1] == std::string(1000, 'x'));
        CHECK(r.blocks[2].offset == 1005);
        CHECK(r.ends == 3);
        CHECK(r.stream_ended);
        CHECK(p.ended());
    }
}

TEST_CASE("parser refuses control frames and trailing bytes on a data stream") {
    Bytes s;
    encode_manifest_end(s, {});
    Recorder r;
    DataFrameParser p;
    CHECK_THROWS_WITH(p.feed(s, r), doctest::Contains("not allowed on a data stream"));

    Bytes t = stream_of({"a"});
    t.push_back(0);
    DataFrameParser q;
    Recorder r2;
    CHECK_THROWS_WITH(q.feed(t, r2), doctest::Contains("after STREAM_END"));
}

TEST_CASE("parser knows when a stream stopped mid-frame") {
    Bytes s = stream_of({"abcdef"});
    Recorder r;
    DataFrameParser p;
    p.feed(Span(s).first(35), r);
    CHECK_FALSE(p.at_frame_boundary());
    CHECK_FALSE(p.ended());
}
