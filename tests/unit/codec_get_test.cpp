#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <random>

#include "core/wire/auth.hpp"
#include "core/wire/codec_get.hpp"
#include "core/wire/link_target.hpp"

using namespace sluice;
using namespace sluice::wire;

namespace {

GetRequest request() {
    GetRequest q;
    q.streams = 8;
    q.reply_port = 40000;
    q.receiver_token = "0123456789abcdef";
    q.path = "models/m.bin";
    for (size_t i = 0; i < q.nonce.size(); ++i) q.nonce[i] = static_cast<unsigned char>(i);
    q.mac.fill(0xab);
    return q;
}

Span payload(const Bytes& frame, uint8_t type) {
    uint32_t len = decode_get_frame_header(Span(frame).first(kFrameHeaderBytes), type);
    REQUIRE(len == frame.size() - kFrameHeaderBytes);
    return Span(frame).subspan(kFrameHeaderBytes);
}

} // namespace

TEST_CASE("get frames round trip") {
    Bytes f;
    encode_get_request(f, request());
    GetRequest q = decode_get_request(payload(f, kGetRequest));
    CHECK(q.streams == 8);
    CHECK(q.reply_port == 40000);
    CHECK(q.receiver_token == "0123456789abcdef");
    CHECK(q.path == "models/m.bin");
    CHECK(q.mac == request().mac);
    CHECK(get_request_signed_part(f).size() == f.size() - kMacBytes);

    GetHello h;
    h.token_required = false;
    h.nonce.fill(7);
    f.clear();
    encode_get_hello(f, h);
    GetHello h2 = decode_get_hello(payload(f, kGetHello));
    CHECK(!h2.token_required);
    CHECK((h2.features & kFeatureGetSessions) != 0);
    CHECK(h2.nonce == h.nonce);

    GetReply r;
    r.status = GetStatus::not_found;
    r.files = 3;
    r.bytes = 99;
    r.message = "'x': not found\x1b[2J";
    f.clear();
    encode_get_reply(f, r);
    GetReply r2 = decode_get_reply(payload(f, kGetReply));
    CHECK(r2.status == GetStatus::not_found);
    CHECK(r2.files == 3);
    CHECK(r2.bytes == 99);
    CHECK(r2.message.find('\x1b') == std::string::npos); // peer text is escaped as it enters

    GetDone d{5, "failed"};
    f.clear();
    encode_get_done(f, d);
    GetDone d2 = decode_get_done(payload(f, kGetDone));
    CHECK(d2.status == 5);
    CHECK(d2.message == "failed");
}

TEST_CASE("get frame headers: the expected type, no flags, bounded length") {
    Bytes f;
    encode_get_done(f, GetDone{});
    CHECK_THROWS_WITH_AS(decode_get_frame_header(Span(f).first(8), kGetReply), doctest::Contains("expected a GET_REPLY"),
                         Error);
    Bytes h = {kGetReply, 1, 0, 0, 0, 0, 0, 0};
    CHECK_THROWS_AS(decode_get_frame_header(h, kGetReply), Error);
    Bytes big = {kGetReply, 0, 0, 0, 0x01, 0x40, 0, 0}; // 16 KiB + 1
    CHECK_THROWS_WITH_AS(decode_get_frame_header(big, kGetReply), doctest::Contains("exceeds the limit"), Error);
    // An HTTP request on the get port: a clear error, not a wait for 1 GB of "payload".
    const std::string http = "GET / HTTP/1.1\r\n";
    CHECK_THROWS_AS(decode_get_frame_header(Span(reinterpret_cast<const unsigned char*>(http.data()), 8), kGetRequest),
                    Error);
}

TEST_CASE("hostile get requests are refused with a protocol error") {
    auto refused = [](GetRequest q, const char* why) {
        Bytes f;
        encode_get_request(f, q);
        CHECK_THROWS_WITH_AS(decode_get_request(Span(f).subspan(kFrameHeaderBytes)), doctest::Contains(why), Error);
    };
    GetRequest q = request();
    q.streams = 0;
    refused(q, "streams");
    q = request();
    q.streams = 129;
    refused(q, "streams");
    q = request();
    q.reply_port = 0; // no connect-back: accepted (the client's streams connect out with GET_ATTACH)
    {
        Bytes b;
        encode_get_request(b, q);
        CHECK(decode_get_request(Span(b).subspan(kFrameHeaderBytes)).reply_port == 0);
    }
    q.reply_port = 40000;
    q = request();
    q.receiver_token = std::string(129, 'a');
    refused(q, "receiver token");
    q = request();
    q.receiver_token = std::string("a\0b", 3);
    refused(q, "NUL");
    q = request();
    q.path = "../etc/passwd";
    refused(q, "..");
    q = request();
    q.path = "/abs";
    refused(q, "");

    Bytes f;
    encode_get_request(f, request());
    f.push_back(0);
    CHECK_THROWS_WITH_AS(decode_get_request(Span(f).subspan(kFrameHeaderBytes)), doctest::Contains("trailing"), Error);
}

TEST_CASE("mutated get frames never crash: every failure is a protocol Error") {
    // A bounded, seeded mutation loop over valid frames (the fuzz target's rule in miniature):
    // decoders may accept or refuse, never crash, hang or throw anything else.
    std::mt19937 rng(15);
    Bytes seeds[4];
    encode_get_request(seeds[0], request());
    encode_get_hello(seeds[1], GetHello{});
    encode_get_reply(seeds[2], GetReply{GetStatus::ok, {}, 1, 2, "ok"});
    encode_get_done(seeds[3], GetDone{1, "x"});
    unsigned refused = 0;
    for (int i = 0; i < 20000; ++i) {
        Bytes b = seeds[i % 4];
        Bytes p(b.begin() + kFrameHeaderBytes, b.end());
        for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) {
            switch (rng() % 3) {
            case 0: if (!p.empty()) p[rng() % p.size()] = static_cast<unsigned char>(rng()); break;
            case 1: if (!p.empty()) p.resize(rng() % p.size()); break;
            case 2: p.push_back(static_cast<unsigned char>(rng())); break;
            }
        }
        try {
            switch (i % 4) {
            case 0: decode_get_request(p); break;
            case 1: decode_get_hello(p); break;
            case 2: decode_get_reply(p); break;
            case 3: decode_get_done(p); break;
            }
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::protocol);
            ++refused;
        }
    }
    CHECK(refused > 10000);
}

TEST_CASE("link_stays_inside: a get's symlinks may not lead out of the destination") {
    struct Case {
        const char* path;
        std::string target;
        bool inside;
    };
    const Case cases[] = {
        {"l", "f", true}, {"l", "./d/f", true}, {"d/l", "../f", true}, {"d/e/l", "../../f", true},
        {"d/l", "../d/e//f/", true}, {"l", ".", true}, {"l", "", false}, {"l", "/etc/passwd", false},
        {"l", "..", false}, {"d/l", "../../f", false}, {"d/e/l", "./../../../f", false},
        // '..' after a name: "a -> ." then "l -> a/../x" would climb out of the destination.
        {"d/l", "a/../f", false}, {"l", "a/..", false}, {"l", std::string("f\0/../..", 8), false},
    };
    for (const Case& c : cases) {
        CAPTURE(c.path);
        CAPTURE(c.target);
        CHECK(sluice::wire::link_stays_inside(c.path, c.target) == c.inside);
    }
}

TEST_CASE("check_confined_entry refuses what a get may not create, naming it") {
    using namespace sluice::wire;
    ManifestEntry e;
    e.path = "d/l";
    e.kind = EntryKind::symlink;
    e.link_target = "../f";
    CHECK_NOTHROW(check_confined_entry(e));
    e.link_target = "../../etc/passwd";
    try {
        check_confined_entry(e);
        FAIL("an escaping symlink was accepted");
    } catch (const Error& err) {
        CHECK(err.code() == ErrorCode::protocol);
        CHECK(std::string(err.what()).find("'d/l' -> '../../etc/passwd'") != std::string::npos);
    }
    e.link_target = "/etc";
    CHECK_THROWS_AS(check_confined_entry(e), Error);
    e.kind = EntryKind::hard_link;
    e.link_target = "f";
    CHECK_THROWS_AS(check_confined_entry(e), Error);
    e.kind = EntryKind::directory;
    e.link_target.clear();
    CHECK_NOTHROW(check_confined_entry(e));
}

TEST_CASE("GET_ATTACH carries the request's nonce; a client's first frame is a request or an attach") {
    std::array<unsigned char, kNonceBytes> nonce{};
    for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<unsigned char>(0xa0 + i);
    Bytes b;
    encode_get_attach(b, nonce);
    uint8_t type = 0;
    CHECK(decode_get_first_header(Span(b).first(kFrameHeaderBytes), &type) == kNonceBytes);
    CHECK(type == kGetAttach);
    CHECK(decode_get_attach(Span(b).subspan(kFrameHeaderBytes)) == nonce);
    CHECK_THROWS_AS(decode_get_attach(Span(b).subspan(kFrameHeaderBytes, kNonceBytes - 1)), Error);
    Bytes r;
    encode_get_request(r, request());
    CHECK(decode_get_first_header(Span(r).first(kFrameHeaderBytes), &type) > 0);
    CHECK(type == kGetRequest);
    Bytes d;
    encode_get_done(d, GetDone{});
    CHECK_THROWS_AS(decode_get_first_header(Span(d).first(kFrameHeaderBytes), &type), Error);
    // h15s: PUSH_REQUEST is a first frame too, GET_REQUEST's payload under its own type; the
    // type byte is under the MAC, so the signed parts of the two differ.
    Bytes p;
    encode_push_request(p, request());
    CHECK(decode_get_first_header(Span(p).first(kFrameHeaderBytes), &type) == p.size() - kFrameHeaderBytes);
    CHECK(type == kPushRequest);
    CHECK(p.size() == r.size());
    CHECK(std::equal(p.begin() + kFrameHeaderBytes, p.end(), r.begin() + kFrameHeaderBytes));
    CHECK(p[0] != r[0]);
    const GetRequest back = decode_get_request(Span(p).subspan(kFrameHeaderBytes));
    CHECK(back.streams == request().streams);
    CHECK(back.receiver_token == request().receiver_token);
}

// h18p: the get's transfer is keyed with a token bound to the server's, never with the
// receiver_token the request carries in clear. Known answers from Python's hmac (the e2e
// test's own implementation) so both ends and the docs agree on the construction.
TEST_CASE("bound transfer token and reply MAC") {
    std::array<unsigned char, kNonceBytes> n{}, sn{};
    for (size_t i = 0; i < n.size(); ++i) {
        n[i] = static_cast<unsigned char>(i);
        sn[i] = static_cast<unsigned char>(16 + i);
    }
    const std::string t = get_transfer_token("testtoken", n, "rt-1");
    CHECK(t == "b215ff38a1851f9fc8057c60e9dae48e338d2979de66f69174e5696e0af89337");
    CHECK(t.size() == 64);
    CHECK(t.size() <= kMaxReceiverTokenBytes); // an old server may be sent it as receiver_token
    CHECK(t != get_transfer_token("othertoken", n, "rt-1")); // the server's token keys it
    CHECK(t != get_transfer_token("testtoken", n, "rt-2"));
    std::array<unsigned char, kNonceBytes> n2 = n;
    n2[0] ^= 1;
    CHECK(t != get_transfer_token("testtoken", n2, "rt-1"));

    const Mac m = get_reply_mac("testtoken", n, sn, 0xa0);
    static const unsigned char want[32] = {0xdb, 0x3f, 0xf4, 0xc9, 0x5e, 0x7f, 0x76, 0xb7, 0x36, 0x8f, 0x39,
                                           0x9d, 0x14, 0x45, 0xb0, 0x70, 0xb4, 0x3b, 0xcb, 0xcd, 0x0f, 0x07,
                                           0xc6, 0x68, 0x97, 0xd1, 0xed, 0x4d, 0x16, 0x6b, 0x25, 0x62};
    CHECK(std::equal(m.begin(), m.end(), want));
    CHECK(!macs_equal(m, get_reply_mac("testtoken", n, sn, 0x20))); // the offer removed: another MAC
    CHECK(!macs_equal(m, server_auth_mac("testtoken", n, sn)));      // never the old one
}
