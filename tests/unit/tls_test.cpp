// The TLS engine (lib/core/tls): key schedule against RFC 8448's vectors, the PSK handshake
// over a socket pair (matching keys; a different PSK refused on both sides), and the record
// layer (round trip; a flipped byte, a replayed and a reordered record refused).
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/tls/handshake.hpp"
#include "core/tls/policy.hpp"
#include "core/tls/record.hpp"
#include "sluice/error.hpp"

using namespace sluice;

namespace {

std::vector<unsigned char> unhex(std::string s) {
    std::vector<unsigned char> v;
    std::string digits;
    for (char c : s)
        if (c != ' ') digits += c;
    for (size_t i = 0; i + 1 < digits.size(); i += 2) v.push_back(static_cast<unsigned char>(std::stoi(digits.substr(i, 2), nullptr, 16)));
    return v;
}

struct Pair {
    UniqueFd a, b;
    Pair() {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        a.reset(sv[0]);
        b.reset(sv[1]);
        timeval tv{.tv_sec = 10, .tv_usec = 0}; // a test that hangs fails instead
        for (int fd : sv) {
            ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        }
    }
};

tls::TrafficKey some_key(unsigned char seed) {
    tls::TrafficKey k;
    for (size_t i = 0; i < k.key.size(); ++i) k.key[i] = static_cast<unsigned char>(seed + i);
    for (size_t i = 0; i < k.iv.size(); ++i) k.iv[i] = static_cast<unsigned char>(seed * 3 + i);
    return k;
}

} // namespace

TEST_CASE("traffic keys follow RFC 8446's key schedule (RFC 8448, simple 1-RTT, server application keys)") {
    auto secret = unhex("a1 1a f9 f0 55 31 f8 56 ad 47 11 6b 45 a9 50 32 82 04 b4 f4 4b fb 6b 3a 4b 4f 1f 3f cb 63 16 43");
    tls::TrafficKey k = tls::traffic_key(secret);
    CHECK(std::vector<unsigned char>(k.key.begin(), k.key.end()) == unhex("9f 02 28 3b 6c 9c 07 ef c2 6b b9 f2 ac 92 e3 56"));
    CHECK(std::vector<unsigned char>(k.iv.begin(), k.iv.end()) == unhex("cf 78 2b 88 dd 83 54 9a ad f1 e9 84"));
}

TEST_CASE("the PSK is bound to the hello: a feature bit or a nonce changed gives another key") {
    wire::ClientHello h;
    h.features = wire::kFeatureEncryption;
    std::array<unsigned char, 16> sn{};
    auto base = tls::hello_psk("token", sn, wire::kFeatureEncryption, h);
    CHECK(base == tls::hello_psk("token", sn, wire::kFeatureEncryption, h));
    CHECK(base != tls::hello_psk("token2", sn, wire::kFeatureEncryption, h));
    CHECK(base != tls::hello_psk("token", sn, 0, h));
    sn[3] = 1;
    CHECK(base != tls::hello_psk("token", sn, wire::kFeatureEncryption, h));
}

TEST_CASE("a TLS 1.3 PSK handshake gives both sides the same keys, crosswise") {
    Pair p;
    tls::Psk psk{};
    psk[0] = 7;
    auto server = std::async(std::launch::async, [&] { return tls::handshake(p.b.get(), tls::Side::server, psk, "client"); });
    tls::LinkKeys c = tls::handshake(p.a.get(), tls::Side::client, psk, "server");
    tls::LinkKeys s = server.get();
    CHECK(c.tx.key == s.rx.key);
    CHECK(c.tx.iv == s.rx.iv);
    CHECK(c.rx.key == s.tx.key);
    CHECK(c.tx.key != c.rx.key);
}

TEST_CASE("a different PSK (a wrong token) fails the handshake on both sides with an auth error") {
    Pair p;
    tls::Psk good{}, bad{};
    bad[5] = 1;
    auto server = std::async(std::launch::async, [&] {
        try {
            tls::handshake(p.b.get(), tls::Side::server, good, "the sender");
        } catch (const Error& e) {
            ::shutdown(p.b.get(), SHUT_RDWR);
            return e;
        }
        return Error(ErrorCode::internal, "no failure");
    });
    ErrorCode client_code = ErrorCode::internal;
    std::string client_msg;
    try {
        tls::handshake(p.a.get(), tls::Side::client, bad, "recv:1");
    } catch (const Error& e) {
        client_code = e.code();
        client_msg = e.what();
    }
    Error se = server.get();
    CHECK(se.code() == ErrorCode::auth);
    CHECK(std::string(se.what()).find("does not match") != std::string::npos);
    INFO(client_msg);
    CHECK(client_code == ErrorCode::auth);
    CHECK(client_msg.find("recv:1") != std::string::npos);
}

TEST_CASE("records: round trip in place; a flipped byte, a replay and a reordering are refused") {
    tls::Sealer sealer(some_key(1));
    tls::Opener opener(some_key(1), "data stream 1");
    std::vector<unsigned char> r1(tls::kMaxRecord), r2(tls::kMaxRecord);
    const char* m1 = "first record";
    const char* m2 = "second";
    std::memcpy(r1.data() + tls::kHeaderBytes, m1, std::strlen(m1));
    std::memcpy(r2.data() + tls::kHeaderBytes, m2, std::strlen(m2));
    size_t n1 = sealer.seal(r1.data(), std::strlen(m1));
    size_t n2 = sealer.seal(r2.data(), std::strlen(m2));
    CHECK(n1 == std::strlen(m1) + tls::kRecordOverhead);
    CHECK(std::memcmp(r1.data() + tls::kHeaderBytes, m1, std::strlen(m1)) != 0); // sealed, not plain
    CHECK(opener.record_size(r1.data()) == n1);

    SUBCASE("in order") {
        auto c1 = r1, c2 = r2;
        CHECK(opener.open(c1.data(), n1) == std::strlen(m1));
        CHECK(std::memcmp(c1.data() + tls::kHeaderBytes, m1, std::strlen(m1)) == 0);
        CHECK(opener.open(c2.data(), n2) == std::strlen(m2));
    }
    SUBCASE("a flipped byte") {
        r1[tls::kHeaderBytes + 3] ^= 0x40;
        CHECK_THROWS_WITH_AS(opener.open(r1.data(), n1), doctest::Contains("failed authentication"), Error);
    }
    SUBCASE("a replayed record") {
        auto again = r1;
        opener.open(r1.data(), n1);
        try {
            opener.open(again.data(), n1);
            FAIL("replay accepted");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::integrity);
        }
    }
    SUBCASE("reordered") { CHECK_THROWS_AS(opener.open(r2.data(), n2), Error); }
    SUBCASE("another key") {
        tls::Opener other(some_key(2), "data stream 1");
        CHECK_THROWS_AS(other.open(r1.data(), n1), Error);
    }
}

TEST_CASE("a record header that is not application data, or too long, is refused before any decryption") {
    tls::Opener opener(some_key(1), "data stream 1");
    unsigned char alert[5] = {21, 3, 3, 0, 20};
    CHECK_THROWS_WITH_AS(opener.record_size(alert), doctest::Contains("not an application data record"), Error);
    unsigned char huge[5] = {23, 3, 3, 0xff, 0xff};
    CHECK_THROWS_WITH_AS(opener.record_size(huge), doctest::Contains("outside"), Error);
}
