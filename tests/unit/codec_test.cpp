#include <doctest/doctest.h>

#include "core/wire/codec.hpp"

using namespace sluice;
using namespace sluice::wire;

namespace {

wire::Span payload_of(const Bytes& frame) {
    FrameHeader h = decode_frame_header(Span(frame).first(kFrameHeaderBytes));
    REQUIRE(h.length == frame.size() - kFrameHeaderBytes);
    return Span(frame).subspan(kFrameHeaderBytes);
}

ManifestEntry entry(uint64_t id, std::string path, EntryKind kind = EntryKind::file, uint64_t size = 10) {
    ManifestEntry e;
    e.file_id = id;
    e.path = std::move(path);
    e.kind = kind;
    e.size = kind == EntryKind::file ? size : 0;
    e.mode = 0644;
    e.mtime_ns = 1'700'000'000'123'456'789;
    if (kind == EntryKind::symlink) e.link_target = "../target";
    return e;
}

} // namespace

TEST_CASE("manifest round trip keeps every field") {
    ManifestPage c;
    c.seq = 7;
    c.entries = {entry(0, "dir", EntryKind::directory), entry(1, "dir/a file é.txt", EntryKind::file, 1ull << 40),
                 entry(2, "dir/link", EntryKind::symlink)};
    Bytes out;
    encode_manifest(out, c);
    ManifestPage d = decode_manifest(payload_of(out));
    CHECK(d.seq == 7);
    REQUIRE(d.entries.size() == 3);
    CHECK(d.entries[1].path == "dir/a file é.txt");
    CHECK(d.entries[1].size == 1ull << 40);
    CHECK(d.entries[1].mtime_ns == 1'700'000'000'123'456'789);
    CHECK(d.entries[2].link_target == "../target");
    CHECK(d.entries[0].kind == EntryKind::directory);
}

TEST_CASE("manifest paths that could escape the destination are refused") {
    for (const char* bad : {"../x", "a/../../x", "/etc/passwd", "a//b", "a/./b", ".", "", "a/"}) {
        CAPTURE(bad);
        ManifestPage c;
        c.entries = {entry(0, bad)};
        Bytes out;
        encode_manifest(out, c);
        CHECK_THROWS_AS(decode_manifest(payload_of(out)), Error);
    }
    CHECK_THROWS_WITH(validate_relative_path("a/../b"), doctest::Contains("'..'"));
    CHECK_THROWS(validate_relative_path(std::string("a\0b", 3)));
    CHECK_THROWS(validate_relative_path(std::string(256, 'x')));
    CHECK_NOTHROW(validate_relative_path(std::string(255, 'x')));
    CHECK_NOTHROW(validate_relative_path("..hidden/...dots"));
}

TEST_CASE("manifest entries breaking type rules are refused") {
    ManifestPage c;
    auto e = entry(0, "d", EntryKind::directory);
    e.size = 5; // a directory with a size
    c.entries = {e};
    Bytes out;
    encode_manifest(out, c);
    CHECK_THROWS_WITH(decode_manifest(payload_of(out)), doctest::Contains("not a file but has a size"));

    c.entries = {entry(0, "f")};
    c.entries[0].mode = 0100644; // type bits are not permission bits
    out.clear();
    encode_manifest(out, c);
    CHECK_THROWS_WITH(decode_manifest(payload_of(out)), doctest::Contains("mode bits"));
}

TEST_CASE("a manifest claiming more entries than it holds is refused before allocating") {
    Bytes out;
    encode_manifest(out, ManifestPage{});
    // count field sits after the 8-byte header and 4-byte seq
    out[12] = 0xff;
    out[13] = 0xff;
    CHECK_THROWS_AS(decode_manifest(payload_of(out)), Error);
}

TEST_CASE("truncated frames are refused, whatever the cut") {
    ManifestPage c;
    c.entries = {entry(0, "a"), entry(1, "b/c")};
    Bytes out;
    encode_manifest(out, c);
    Span p = payload_of(out);
    for (size_t cut = 0; cut < p.size(); ++cut) {
        CAPTURE(cut);
        CHECK_THROWS_AS(decode_manifest(p.first(cut)), Error);
    }
}

TEST_CASE("frame header bounds each type") {
    unsigned char h[8];
    encode_frame_header(h, FrameType::block, kBlockPrefixBytes + kMaxBlockData);
    CHECK_NOTHROW(decode_frame_header(h));
    encode_frame_header(h, FrameType::block, kBlockPrefixBytes + kMaxBlockData + 1);
    CHECK_THROWS_WITH(decode_frame_header(h), doctest::Contains("exceeds the limit"));
    encode_frame_header(h, FrameType::manifest, kMaxControlPayload + 1);
    CHECK_THROWS(decode_frame_header(h));
    encode_frame_header(h, FrameType::block, 3);
    CHECK_THROWS_WITH(decode_frame_header(h), doctest::Contains("shorter than its prefix"));
    h[0] = 0x77;
    CHECK_THROWS_WITH(decode_frame_header(h), doctest::Contains("unknown frame type 0x77"));
    encode_frame_header(h, FrameType::abort, 4);
    h[2] = 1;
    CHECK_THROWS_WITH(decode_frame_header(h), doctest::Contains("reserved"));
}

TEST_CASE("control frames round trip") {
    Bytes out;
    encode_final_status(out, {3, 10, 2, 12345, "disk full on 'x'"});
    auto s = decode_final_status(payload_of(out));
    CHECK(s.status == 3);
    CHECK(s.files_failed == 2);
    CHECK(s.message == "disk full on 'x'");

    out.clear();
    encode_manifest_ack(out, {4, {{1, 0, 8 << 20}, {9, 16 << 20, 8 << 20}}});
    auto a = decode_manifest_ack(payload_of(out));
    REQUIRE(a.verified.size() == 2);
    CHECK(a.verified[1].offset == 16 << 20);

    out.clear();
    encode_resend(out, {5, 8 << 20, 1 << 20});
    auto rs = decode_resend(payload_of(out));
    CHECK(rs.file_id == 5);
    CHECK(rs.length == 1 << 20);

    out.clear();
    encode_all_verified(out);
    CHECK(decode_frame_header(Span(out).first(8)).type == static_cast<uint8_t>(FrameType::all_verified));
    CHECK(out.size() == kFrameHeaderBytes);

    out.clear();
    encode_working(out);
    CHECK(decode_frame_header(Span(out).first(8)).type == static_cast<uint8_t>(FrameType::working));
    CHECK(out.size() == kFrameHeaderBytes);
    out[4] = 1; // WORKING has no payload: a length is a protocol error, not bytes to read
    CHECK_THROWS_AS(decode_frame_header(Span(out).first(8)), sluice::Error);

    out.clear();
    encode_certificate_accepted(out);
    CHECK(out.size() == kFrameHeaderBytes);
    CHECK(out[0] == 0x06);
    CHECK(decode_frame_header(Span(out).first(8)).type == static_cast<uint8_t>(FrameType::certificate_accepted));
    CHECK(std::string(frame_type_name(0x06)) == "CERTIFICATE_ACCEPTED");
    out[4] = 1; // no payload either: the sender reads the header alone (send/session/handshake.cpp)
    CHECK_THROWS_AS(decode_frame_header(Span(out).first(8)), sluice::Error);

    out.clear();
    encode_transfer_end(out, {16, 99, 1ull << 33});
    auto t = decode_transfer_end(payload_of(out));
    CHECK(t.data_streams == 16);
    CHECK(t.bytes == 1ull << 33);
}

TEST_CASE("handshake messages round trip and validate stream indices") {
    ClientHello h;
    h.role = Role::data;
    h.stream_index = 3;
    h.stream_count = 4;
    h.transfer_id[0] = 0xab;
    Bytes out;
    encode_client_hello(out, h);
    REQUIRE(out.size() == kClientHelloBytes);
    auto d = decode_client_hello(out);
    CHECK(d.stream_index == 3);
    CHECK(d.transfer_id[0] == 0xab);

    h.stream_index = 5; // beyond the count
    out.clear();
    encode_client_hello(out, h);
    CHECK_THROWS_WITH(decode_client_hello(out), doctest::Contains("outside 1..4"));

    out[0] = 'X';
    CHECK_THROWS_WITH(decode_client_hello(out), doctest::Contains("bad magic"));
}
