// The AVX2 checksum must agree with the system libxxhash bit for bit: both ends of a transfer,
// and journals written by an older build, compare these values.
#include <doctest/doctest.h>
#include <xxhash.h>

#include <random>
#include <vector>

#include "core/checksum/xxh3.hpp"

TEST_CASE("xxh3_64 and Xxh3 equal libxxhash for every length class") {
    std::mt19937_64 rng(7);
    std::vector<unsigned char> buf((3 << 20) + 17);
    for (auto& b : buf) b = static_cast<unsigned char>(rng());
    for (size_t n : {size_t{0}, size_t{1}, size_t{16}, size_t{17}, size_t{128}, size_t{129}, size_t{240}, size_t{241},
                     size_t{1024}, size_t{4097}, size_t{1} << 20, buf.size()}) {
        CHECK(sluice::xxh3_64(buf.data() + 1, n - (n ? 1 : 0)) == XXH3_64bits(buf.data() + 1, n - (n ? 1 : 0)));
        sluice::Xxh3 h;
        size_t done = 0, piece = 1;
        while (done < n) {
            size_t k = std::min(piece, n - done);
            h.update(buf.data() + done, k);
            done += k;
            piece = piece * 3 + 1;
        }
        CHECK(h.digest() == XXH3_64bits(buf.data(), n));
        h.reset();
        h.update(buf.data(), n);
        CHECK(h.digest() == XXH3_64bits(buf.data(), n));
    }
}
