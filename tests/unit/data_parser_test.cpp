#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
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
    void stream_end(const StreamCounts&) override { stream_ended = true; }
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

TEST_CASE("parser says what the sender still owes of the frame it began, and nothing between frames") {
    // The receive paths' low-water mark is this figure: a mark above it would wait on a pause.
    Bytes s = stream_of({std::string(1000, 'x'), "yz"});
    const size_t frame1 = kFrameHeaderBytes + kBlockPrefixBytes + 1000;
    Recorder r;
    DataFrameParser p;
    CHECK(p.owed() == 0);
    for (size_t i = 0; i < s.size(); ++i) {
        CAPTURE(i);
        p.feed(Span(s).subspan(i, 1), r);
        const size_t fed = i + 1;
        if (fed == frame1) {
            CHECK(p.owed() == 0); // a block ended: the sender may pause here
        } else if (fed < kFrameHeaderBytes) {
            CHECK(p.owed() == kFrameHeaderBytes - fed);
        } else if (fed < kFrameHeaderBytes + kBlockPrefixBytes) {
            CHECK(p.owed() == kFrameHeaderBytes + kBlockPrefixBytes - fed);
        } else if (fed < frame1) {
            CHECK(p.owed() == frame1 - fed); // the block's data, to its last byte
        }
    }
    CHECK(p.ended());
    CHECK(p.owed() == 0);
}

namespace {

// Pulls every frame of s through a DataFrameReader the way the socket paths do: header and
// prefix through the reader, each block's data by the caller. Returns the blocks' data.
std::vector<std::string> pull_all(const Bytes& s, DataFrameReader& r) {
    size_t pos = 0;
    auto read = [&](unsigned char* p, size_t n) {
        REQUIRE(s.size() - pos >= n);
        std::memcpy(p, s.data() + pos, n);
        pos += n;
    };
    std::vector<std::string> out;
    while (auto b = r.next(read)) {
        REQUIRE(s.size() - pos >= b->data_length);
        out.emplace_back(s.begin() + static_cast<long>(pos), s.begin() + static_cast<long>(pos + b->data_length));
        pos += b->data_length;
    }
    CHECK(pos == s.size());
    return out;
}

Bytes frame(FrameType type, const Bytes& payload) {
    Bytes out(kFrameHeaderBytes);
    encode_frame_header(out.data(), type, static_cast<uint32_t>(payload.size()));
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

Bytes stream_end_payload(uint64_t blocks, uint64_t bytes) {
    Bytes f;
    encode_stream_end(f, {blocks, bytes});
    return Bytes(f.begin() + kFrameHeaderBytes, f.end());
}

// The error each reader gives for s: the pull reader and the push parser must say the same.
std::string pull_error(const Bytes& s) {
    DataFrameReader r("data stream 7");
    try {
        pull_all(s, r);
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::protocol);
        return e.what();
    }
    return {};
}
std::string push_error(const Bytes& s) {
    DataFrameParser p("data stream 7");
    Recorder rec;
    try {
        p.feed(s, rec);
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::protocol);
        return e.what();
    }
    return {};
}
std::string both_error(const Bytes& s) {
    std::string a = pull_error(s);
    CHECK(a == push_error(s));
    return a;
}

} // namespace

TEST_CASE("reader pulls blocks and ends with matching counts") {
    Bytes s = stream_of({"hello", std::string(1000, 'x'), "z"});
    DataFrameReader r;
    auto data = pull_all(s, r);
    REQUIRE(data.size() == 3);
    CHECK(data[0] == "hello");
    CHECK(data[2] == "z");
    CHECK(r.ended());
    CHECK(r.counts().blocks == 3);
    CHECK(r.counts().bytes == 1006);
}

TEST_CASE("one set of rules: both readers refuse the same frames with the same words") {
    SUBCASE("an empty BLOCK") {
        Bytes s = frame(FrameType::block, Bytes(kBlockPrefixBytes, 0));
        CHECK(both_error(s) == "BLOCK frame without data on data stream 7");
    }
    SUBCASE("a BLOCK over the data limit") {
        Bytes s(kFrameHeaderBytes);
        encode_frame_header(s.data(), FrameType::block, static_cast<uint32_t>(kBlockPrefixBytes + kMaxBlockData + 1));
        CHECK(both_error(s).find("exceeds the limit") != std::string::npos);
    }
    SUBCASE("a BLOCK shorter than its prefix") {
        Bytes s = frame(FrameType::block, Bytes(3, 0));
        CHECK(both_error(s).find("shorter than its prefix") != std::string::npos);
    }
    SUBCASE("a STREAM_END of the wrong length") {
        Bytes s = frame(FrameType::stream_end, Bytes(kStreamEndBytes + 8, 0));
        CHECK(both_error(s) == "STREAM_END frame of 24 bytes on data stream 7 (it carries 16)");
    }
    SUBCASE("STREAM_END announcing other counts than carried") {
        Bytes s = stream_of({"abc"});
        s.resize(s.size() - kFrameHeaderBytes - kStreamEndBytes);
        Bytes end = frame(FrameType::stream_end, stream_end_payload(1, 4));
        s.insert(s.end(), end.begin(), end.end());
        CHECK(both_error(s) == "data stream 7 ended announcing 1 blocks / 4 bytes, but carried 1 / 3");
    }
    SUBCASE("a control frame, named") {
        Bytes s;
        encode_manifest_end(s, {});
        CHECK(both_error(s) == "MANIFEST_END frame is not allowed on a data stream (data stream 7)");
    }
    SUBCASE("an unknown frame type, named by its number") {
        Bytes s = frame(static_cast<FrameType>(0x7e), {});
        CHECK(both_error(s).find("unknown frame type 0x7e") != std::string::npos);
    }
    SUBCASE("data after STREAM_END") {
        Bytes s = stream_of({"a"});
        Bytes more = stream_of({"b"});
        s.insert(s.end(), more.begin(), more.end());
        CHECK(push_error(s) == "data after STREAM_END on data stream 7");
        DataFrameReader r("data stream 7");
        size_t pos = 0;
        auto read = [&](unsigned char* p, size_t n) {
            std::memcpy(p, s.data() + pos, n);
            pos += n;
        };
        REQUIRE(r.next(read));
        pos += 1; // the block's data
        REQUIRE_FALSE(r.next(read));
        CHECK_THROWS_WITH(r.next(read), "data after STREAM_END on data stream 7");
    }
}

TEST_CASE("bytes queued on a socket after STREAM_END are refused") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    Bytes s = stream_of({"a"});
    DataFrameReader r;
    pull_all(s, r);
    CHECK_NOTHROW(refuse_data_after_end(r, sv[0])); // nothing queued
    unsigned char b = 0;
    REQUIRE(::write(sv[1], &b, 1) == 1);
    CHECK_THROWS_WITH(refuse_data_after_end(r, sv[0]), doctest::Contains("data after STREAM_END"));
    ::close(sv[0]);
    ::close(sv[1]);
}
