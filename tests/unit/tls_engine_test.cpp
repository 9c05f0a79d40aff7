// The record engines (lib/core/tls/aes_gcm.hpp): intel-ipsec-mb's VAES path and OpenSSL's EVP
// compute the same AES-128-GCM, so a record sealed by either opens with either (peers may run
// different engines); a record altered in flight fails under each; the engine the process
// chose is the one the build and CPU allow. Where ipsec-mb cannot run here (a build without it,
// a CPU without VAES) the cross-engine cases are skipped and say so.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/tls/aes_gcm.hpp"
#include "core/tls/record.hpp"
#include "sluice/error.hpp"

using namespace sluice;

namespace {

tls::TrafficKey key_of(unsigned char seed) {
    tls::TrafficKey k;
    for (size_t i = 0; i < k.key.size(); ++i) k.key[i] = static_cast<unsigned char>(seed * 7 + i);
    for (size_t i = 0; i < k.iv.size(); ++i) k.iv[i] = static_cast<unsigned char>(seed + 11 * i);
    return k;
}

bool have_ipsec() {
    std::string why;
    const bool ok = tls::ipsec_mb_usable(why);
    if (!ok) MESSAGE("ipsec-mb cases skipped: " << why);
    return ok;
}

// A record slot holding n plain bytes (a pattern that differs per record).
std::vector<unsigned char> slot(size_t n, unsigned seed) {
    std::vector<unsigned char> r(n + tls::kRecordOverhead);
    for (size_t i = 0; i < n; ++i) r[tls::kHeaderBytes + i] = static_cast<unsigned char>(i * 31 + seed);
    return r;
}

// Content lengths around GCM's 16-byte blocks, ipsec-mb's 4- and 16-block strides and a full record.
const size_t kLengths[] = {0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 1000, 4095, 4096, 4097, 16383, tls::kMaxPlain};

} // namespace

TEST_CASE("a record sealed by either engine is byte for byte the other's, and opens with either") {
    if (!have_ipsec()) return;
    const tls::GcmEngine engines[] = {tls::GcmEngine::openssl, tls::GcmEngine::ipsec_mb};
    for (auto sealer_engine : engines)
        for (auto opener_engine : engines) {
            CAPTURE(static_cast<int>(sealer_engine));
            CAPTURE(static_cast<int>(opener_engine));
            tls::Sealer mine(key_of(1), sealer_engine);
            tls::Sealer reference(key_of(1), sealer_engine == tls::GcmEngine::openssl ? tls::GcmEngine::ipsec_mb
                                                                                      : tls::GcmEngine::openssl);
            tls::Opener opener(key_of(1), "data stream 1", opener_engine);
            unsigned seed = 0;
            for (size_t n : kLengths) {
                CAPTURE(n);
                auto a = slot(n, ++seed), b = a, plain = a;
                const size_t wire = mine.seal(a.data(), n);
                REQUIRE(reference.seal(b.data(), n) == wire);
                CHECK(std::memcmp(a.data(), b.data(), wire) == 0); // same ciphertext and tag
                // Out of place too, as the direct receive path opens into its O_DIRECT buffers.
                std::vector<unsigned char> out(wire);
                REQUIRE(opener.open_to(a.data(), wire, out.data()) == n);
                CHECK(std::memcmp(out.data(), plain.data() + tls::kHeaderBytes, n) == 0);
            }
        }
}

TEST_CASE("a record sealed from another buffer is byte for byte the one sealed in place, under each engine") {
    // The encrypted sender seals cold blocks from the O_DIRECT buffer they were read into
    // (Sealer::seal_from): the content and its type byte are encrypted in two steps, which
    // must give the same record as the one-step seal in place, whatever the length's remainder.
    std::vector<tls::GcmEngine> engines = {tls::GcmEngine::openssl};
    if (have_ipsec()) engines.push_back(tls::GcmEngine::ipsec_mb);
    for (auto engine : engines) {
        CAPTURE(static_cast<int>(engine));
        tls::Sealer in_place(key_of(2), engine), from(key_of(2), engine);
        tls::Opener opener(key_of(2), "data stream 1", engine);
        unsigned seed = 0;
        for (size_t n : kLengths) {
            CAPTURE(n);
            auto a = slot(n, ++seed);
            const std::vector<unsigned char> plain(a.begin() + tls::kHeaderBytes, a.begin() + static_cast<long>(tls::kHeaderBytes + n));
            std::vector<unsigned char> b(a.size(), 0xee);
            const size_t wire = in_place.seal(a.data(), n);
            REQUIRE(from.seal_from(b.data(), plain.data(), n, from.take(1)) == wire);
            CHECK(std::memcmp(a.data(), b.data(), wire) == 0);
            REQUIRE(opener.open(b.data(), wire) == n);
            CHECK(std::memcmp(b.data() + tls::kHeaderBytes, plain.data(), n) == 0);
        }
    }
}

TEST_CASE("under each engine a flipped bit anywhere in a record, a replay or another key is refused") {
    std::vector<tls::GcmEngine> engines = {tls::GcmEngine::openssl};
    if (have_ipsec()) engines.push_back(tls::GcmEngine::ipsec_mb);
    for (auto engine : engines) {
        CAPTURE(static_cast<int>(engine));
        tls::Sealer sealer(key_of(2), engine);
        const size_t n = 5000;
        auto rec = slot(n, 9);
        const size_t wire = sealer.seal(rec.data(), n);
        // The header is the associated data, then the ciphertext, the inner type and the tag.
        for (size_t at : {size_t(4), tls::kHeaderBytes, tls::kHeaderBytes + 4095, wire - tls::kTagBytes - 1, wire - 1}) {
            CAPTURE(at);
            tls::Opener opener(key_of(2), "data stream 1", engine);
            auto bad = rec;
            bad[at] ^= 0x08;
            try {
                opener.open(bad.data(), wire);
                FAIL("an altered record opened");
            } catch (const Error& e) {
                CHECK(e.code() == ErrorCode::integrity);
            }
        }
        tls::Opener opener(key_of(2), "data stream 1", engine);
        auto again = rec;
        CHECK(opener.open(rec.data(), wire) == n);
        CHECK_THROWS_AS(opener.open(again.data(), wire), Error); // the same record twice: sequence 1 now
        tls::Opener other(key_of(3), "data stream 1", engine);
        auto copy = again;
        CHECK_THROWS_AS(other.open(copy.data(), wire), Error);
    }
}

TEST_CASE("the process's engine is ipsec-mb exactly where this build and CPU can run it, and says why") {
    if (std::getenv("SLUICE_RECORD_ENGINE")) return; // forced: nothing to judge here
    std::string why;
    const bool ipsec = tls::ipsec_mb_usable(why);
    const tls::GcmChoice& c = tls::gcm_choice();
    CHECK(c.name == (ipsec ? "ipsec-mb" : "openssl"));
    CHECK((c.engine == tls::GcmEngine::ipsec_mb) == ipsec);
    CHECK(c.why.find(why) != std::string::npos); // the reason ipsec-mb ran, or did not
}
