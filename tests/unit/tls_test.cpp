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
#include "core/tls/record_reader.hpp"
#include "core/tls/record_writer.hpp"
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

namespace {

// For the record writer and reader (core/tls/record_writer.hpp, record_reader.hpp) of encrypted
// data streams without a relay.

tls::TrafficKey key_of(unsigned char seed) {
    tls::TrafficKey k;
    for (size_t i = 0; i < k.key.size(); ++i) k.key[i] = static_cast<unsigned char>(seed + 7 * i);
    for (size_t i = 0; i < k.iv.size(); ++i) k.iv[i] = static_cast<unsigned char>(seed ^ i);
    return k;
}

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed) >> 3);
    return v;
}

// data as a writer with key_of(1) seals it: the bytes on the wire.
std::vector<unsigned char> sealed(const std::vector<unsigned char>& data) {
    Pair p;
    {
        tls::RecordWriter w(p.a.get(), key_of(1), "data stream 1", 64 << 10);
        w.write(data.data(), data.size());
        w.flush();
    }
    std::vector<unsigned char> wire(64 << 10);
    ssize_t n = ::recv(p.b.get(), wire.data(), wire.size(), MSG_WAITALL | MSG_DONTWAIT);
    REQUIRE(n > static_cast<ssize_t>(data.size()));
    wire.resize(static_cast<size_t>(n));
    return wire;
}

// Reads everything from fd (until its end) through a reader whose receives take at most
// `cut` bytes each; returns the plain bytes.
std::vector<unsigned char> read_all(int fd, const tls::TrafficKey& k, size_t cut) {
    tls::RecordReader r(k, "data stream 1", 1 << 20);
    std::vector<unsigned char> out, plain(1 << 20);
    for (;;) {
        ssize_t n = ::recv(fd, r.room(), std::min(cut, r.room_bytes()), 0);
        REQUIRE(n >= 0);
        if (n == 0) {
            CHECK_FALSE(r.mid_record());
            return out;
        }
        size_t m = r.open(static_cast<size_t>(n), plain.data());
        out.insert(out.end(), plain.begin(), plain.begin() + static_cast<long>(m));
    }
}


} // namespace

TEST_CASE("records written in place and by copy are opened in order, whatever the receives' cuts") {
    for (size_t cut : {size_t{1} << 20, size_t{7}, size_t{16411}}) {
    CAPTURE(cut);
    Pair p;
    const auto head = pattern(32, 1), block = pattern(300'000, 2), small = pattern(5000, 3), block2 = pattern(70'000, 4);
    auto got = std::async(std::launch::async, [&] { return read_all(p.b.get(), key_of(9), cut); });
    {
        tls::RecordWriter w(p.a.get(), key_of(9), "data stream 1", 128 << 10);
        CHECK(w.capacity() == 128u << 10);
        w.write(small.data(), small.size()); // a partial record, sealed before the block's
        // A block larger than the writer goes in parts; the second part flushes the first.
        for (size_t done = 0; done < block.size();) {
            const size_t part = std::min(w.capacity(), block.size() - done);
            tls::RecordWriter::Reserved r = w.reserve(done == 0 ? head.size() : 0, part);
            size_t at = done;
            for (size_t k = 0; k < r.records; ++k) {
                std::memcpy(r.iov[k].iov_base, block.data() + at, r.iov[k].iov_len);
                at += r.iov[k].iov_len;
                if (k == 1) w.seal_data(2); // sealed early, as the send path does after each read
            }
            CHECK(at == done + part);
            if (r.head) std::memcpy(r.head, head.data(), head.size()); // filled last, sent first
            w.commit();
            done += part;
        }
        tls::RecordWriter::Reserved r = w.reserve(head.size(), block2.size());
        for (size_t k = 0, at = 0; k < r.records; at += r.iov[k].iov_len, ++k)
            std::memcpy(r.iov[k].iov_base, block2.data() + at, r.iov[k].iov_len);
        std::memcpy(r.head, head.data(), head.size());
        w.commit();
        w.flush();
    }
    ::shutdown(p.a.get(), SHUT_WR);
    std::vector<unsigned char> want(small);
    want.insert(want.end(), head.begin(), head.end());
    want.insert(want.end(), block.begin(), block.end());
    want.insert(want.end(), head.begin(), head.end());
    want.insert(want.end(), block2.begin(), block2.end());
    CHECK(got.get() == want);
    }
}

TEST_CASE("write() seals whole records straight from the caller's bytes: the wire is that of copying them in") {
    // Pieces that start mid-record, on a record boundary, exactly one record long, many records
    // long, and that fill the writer (a flush in the middle of a piece): the records on the wire
    // are the stream's kMaxPlain slices in order, each sealed under its own sequence number,
    // whatever the pieces were; and they open back to the same bytes.
    const size_t sizes[] = {100, tls::kMaxPlain - 100, tls::kMaxPlain, 3 * tls::kMaxPlain + 7, 5,
                            tls::kMaxPlain * 9, 40'000, tls::kMaxPlain - 40'000 % tls::kMaxPlain, 2 * tls::kMaxPlain, 1};
    std::vector<unsigned char> all;
    Pair p;
    auto got = std::async(std::launch::async, [&] { return read_all(p.b.get(), key_of(5), 16411); });
    {
        tls::RecordWriter w(p.a.get(), key_of(5), "data stream 1", 4 * tls::kMaxPlain); // 6 slots: flushes mid-piece
        unsigned seed = 1;
        for (size_t n : sizes) {
            const auto piece = pattern(n, seed++);
            w.write(piece.data(), piece.size());
            all.insert(all.end(), piece.begin(), piece.end());
        }
        w.flush();
    }
    ::shutdown(p.a.get(), SHUT_WR);
    CHECK(got.get() == all);

    // The same stream as one piece copied record by record into slots and sealed there: the
    // reference wire bytes, against the writer's with the pieces above.
    Pair q;
    auto raw = std::async(std::launch::async, [&] {
        std::vector<unsigned char> wire, buf(1 << 16);
        for (;;) {
            ssize_t n = ::recv(q.b.get(), buf.data(), buf.size(), 0);
            if (n <= 0) return wire;
            wire.insert(wire.end(), buf.begin(), buf.begin() + n);
        }
    });
    {
        tls::RecordWriter w(q.a.get(), key_of(5), "data stream 1", 64 << 10);
        unsigned seed = 1;
        for (size_t n : sizes) {
            const auto piece = pattern(n, seed++);
            w.write(piece.data(), piece.size());
        }
        w.flush();
    }
    ::shutdown(q.a.get(), SHUT_WR);
    std::vector<unsigned char> want;
    {
        tls::Sealer ref(key_of(5));
        std::vector<unsigned char> slot(tls::kMaxRecord);
        for (size_t at = 0; at < all.size(); at += tls::kMaxPlain) {
            const size_t n = std::min(tls::kMaxPlain, all.size() - at);
            std::memcpy(slot.data() + tls::kHeaderBytes, all.data() + at, n);
            const size_t size = ref.seal(slot.data(), n);
            want.insert(want.end(), slot.begin(), slot.begin() + static_cast<long>(size));
        }
    }
    const std::vector<unsigned char> wire = raw.get();
    CHECK(wire.size() == want.size());
    CHECK(wire == want);
}

TEST_CASE("a reader refuses a record altered in flight (integrity) and another key's records") {
    const auto data = pattern(40'000, 5);
    std::vector<unsigned char> wire = sealed(data);
    const auto n = static_cast<ssize_t>(wire.size());
    std::vector<unsigned char> plain(1 << 20);
    SUBCASE("a flipped byte in the second record") {
        tls::RecordReader r(key_of(1), "data stream 1", 1 << 20);
        std::memcpy(r.room(), wire.data(), static_cast<size_t>(n));
        r.room()[tls::kMaxRecord + 100] ^= 1;
        try {
            r.open(static_cast<size_t>(n), plain.data());
            FAIL("altered record accepted");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::integrity);
        }
    }
    SUBCASE("another key") {
        tls::RecordReader r(key_of(2), "data stream 1", 1 << 20);
        std::memcpy(r.room(), wire.data(), static_cast<size_t>(n));
        CHECK_THROWS_AS(r.open(static_cast<size_t>(n), plain.data()), Error);
    }
    SUBCASE("whole and cut") {
        tls::RecordReader r(key_of(1), "data stream 1", 1 << 20);
        std::memcpy(r.room(), wire.data(), 100);
        CHECK(r.open(100, plain.data()) == 0); // no whole record yet
        CHECK(r.mid_record());
        std::memcpy(r.room(), wire.data() + 100, static_cast<size_t>(n) - 100);
        CHECK(r.open(static_cast<size_t>(n) - 100, plain.data()) == data.size());
        CHECK(std::memcmp(plain.data(), data.data(), data.size()) == 0);
        CHECK_FALSE(r.mid_record());
    }
}

namespace {

// Pulls the plain bytes of fd with RecordReader::read in requests of the sizes given (cycled
// until `total`), receiving at most `cut` bytes at a time; checks each request wrote nothing
// past its end (past the spare byte when spare).
std::vector<unsigned char> pull_all(int fd, const tls::TrafficKey& k, size_t total, std::vector<size_t> sizes, bool spare,
                                    size_t cut) {
    tls::RecordReader r(k, "data stream 1", 1 << 20);
    std::vector<unsigned char> out;
    std::vector<unsigned char> buf;
    size_t receives = 0;
    auto receive = [&](unsigned char* p, size_t least, size_t most) {
        CHECK(least >= 1);
        CHECK(least <= most);
        size_t got = 0;
        while (got < least) {
            ssize_t n = ::recv(fd, p + got, std::min(most - got, cut), 0);
            REQUIRE(n > 0);
            got += static_cast<size_t>(n);
        }
        ++receives;
        return got;
    };
    for (size_t i = 0; out.size() < total; ++i) {
        const size_t n = std::min(sizes[i % sizes.size()], total - out.size());
        buf.assign(n + 64, 0xEE);
        r.read(buf.data(), n, spare, receive);
        for (size_t j = n + (spare ? 1 : 0); j < buf.size(); ++j) REQUIRE(buf[j] == 0xEE);
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<long>(n));
    }
    CHECK_FALSE(r.holding());
    CHECK(receives > 0);
    return out;
}

} // namespace

TEST_CASE("read() pulls exact plain byte counts, opening records straight into the caller's memory or cut") {
    const auto head = pattern(40, 6), block = pattern(200'000, 7), small = pattern(3000, 8);
    std::vector<unsigned char> want;
    for (const auto* part : {&small, &head, &block, &small}) want.insert(want.end(), part->begin(), part->end());
    struct Shape {
        std::vector<size_t> sizes;
        bool spare;
        size_t cut;
    };
    // Frame-sized and record-sized requests (a block's data ends exactly at a record: with a
    // spare byte it is opened in place of the caller's memory), odd sizes, tiny receives.
    for (const Shape& s : {Shape{{8, 32, tls::kMaxPlain * 4, 8, 32}, true, size_t{1} << 20},
                           Shape{{8, 32, tls::kMaxPlain * 4}, false, size_t{1} << 20}, Shape{{7, 100'003, 1}, true, 4093},
                           Shape{{tls::kMaxPlain - 1, tls::kMaxPlain + 1}, false, 16411}}) {
        CAPTURE(s.spare);
        CAPTURE(s.cut);
        Pair p;
        auto got = std::async(std::launch::async, [&] { return pull_all(p.b.get(), key_of(4), want.size(), s.sizes, s.spare, s.cut); });
        {
            tls::RecordWriter w(p.a.get(), key_of(4), "data stream 1", 256 << 10);
            w.write(small.data(), small.size());
            tls::RecordWriter::Reserved r = w.reserve(head.size(), block.size());
            for (size_t k = 0, at = 0; k < r.records; at += r.iov[k].iov_len, ++k)
                std::memcpy(r.iov[k].iov_base, block.data() + at, r.iov[k].iov_len);
            std::memcpy(r.head, head.data(), head.size());
            w.commit();
            w.write(small.data(), small.size());
            w.flush();
        }
        CHECK(got.get() == want);
    }
}

TEST_CASE("read() refuses a record altered in flight") {
    const auto data = pattern(60'000, 9);
    std::vector<unsigned char> wire = sealed(data);
    const auto n = static_cast<ssize_t>(wire.size());
    wire[tls::kMaxRecord * 2 + 50] ^= 4; // the third record
    tls::RecordReader r(key_of(1), "data stream 1", 1 << 20);
    size_t fed = 0;
    auto receive = [&](unsigned char* p, size_t least, size_t most) {
        const size_t m = std::min(most, static_cast<size_t>(n) - fed);
        REQUIRE(m >= least);
        std::memcpy(p, wire.data() + fed, m);
        fed += m;
        return m;
    };
    std::vector<unsigned char> out(data.size() + 1);
    try {
        r.read(out.data(), data.size(), true, receive);
        FAIL("altered record accepted");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::integrity);
    }
}
