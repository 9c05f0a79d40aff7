// The record writer and reader of encrypted data streams without a relay
// (core/tls/record_writer.hpp, record_reader.hpp): what a writer sends in place and by copy
// is what the reader opens, in order, whatever the cuts of the receives; a block's head,
// sealed after its data, still comes first.
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <cstring>
#include <future>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/tls/record_reader.hpp"
#include "core/tls/record_writer.hpp"
#include "sluice/error.hpp"

using namespace sluice;

namespace {

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

TEST_CASE("a reader refuses a record altered in flight (integrity) and another key's records") {
    Pair p;
    const auto data = pattern(40'000, 5);
    {
        tls::RecordWriter w(p.a.get(), key_of(1), "data stream 1", 64 << 10);
        w.write(data.data(), data.size());
        w.flush();
    }
    std::vector<unsigned char> wire(64 << 10);
    ssize_t n = ::recv(p.b.get(), wire.data(), wire.size(), MSG_WAITALL | MSG_DONTWAIT);
    REQUIRE(n > static_cast<ssize_t>(data.size()));
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
