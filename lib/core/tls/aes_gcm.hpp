#pragma once
// AES-128-GCM for the user-space record layer (record.hpp), by one of two engines chosen once
// per process (docs/design.md, "Record engine"):
//   ipsec-mb  Intel's intel-ipsec-mb (Debian's libipsec-mb), on a CPU with VAES and
//             VPCLMULQDQ (AVX-512): 4 blocks per instruction. Debian 12's OpenSSL 3.0 has no
//             such path (its AES-GCM is AES-NI + AVX, one block per instruction), and its
//             AES-GCM was ~42% of an encrypted transfer's CPU (docs/benchmarks.md).
//   openssl   OpenSSL's EVP (AES-NI where the CPU has it): everywhere else.
// Both compute the same function: a record sealed by one opens with the other (a peer may run
// either). SLUICE_RECORD_ENGINE=openssl|ipsec-mb overrides the choice (benches, tests); a
// forced engine that cannot run here is refused, not replaced.
#include <openssl/evp.h>

#include <cstddef>
#include <memory>
#include <string>

namespace sluice::tls {

enum class GcmEngine { openssl, ipsec_mb };

struct GcmChoice {
    GcmEngine engine = GcmEngine::openssl;
    std::string name; // Stats::tls_record_engine: "ipsec-mb" or "openssl"
    std::string why;  // the library's version and the CPU path, or why not ipsec-mb
};

// The process's engine, decided on first use (then fixed). Throws usage for an
// SLUICE_RECORD_ENGINE this build or CPU cannot run, naming the value.
const GcmChoice& gcm_choice();

// Whether this build and CPU can run ipsec-mb's VAES path; why not when they cannot.
bool ipsec_mb_usable(std::string& why);

// One key, one direction (sealing or opening), set up once; nothing allocated per call.
class AesGcm {
public:
    static constexpr size_t kKeyBytes = 16, kNonceBytes = 12, kTagBytes = 16;
    AesGcm(const unsigned char key[kKeyBytes], bool encrypt, GcmEngine engine);
    AesGcm(const unsigned char key[kKeyBytes], bool encrypt) : AesGcm(key, encrypt, gcm_choice().engine) {}
    ~AesGcm();
    AesGcm(const AesGcm&) = delete;
    AesGcm& operator=(const AesGcm&) = delete;
    GcmEngine engine() const { return engine_; }

    // Encrypts data[0..len) in place and writes its tag; aad is authenticated, not encrypted.
    void seal(const unsigned char nonce[kNonceBytes], const unsigned char* aad, size_t aad_len, unsigned char* data,
              size_t len, unsigned char tag[kTagBytes]);
    // Encrypts in[0..len) followed by the byte `last` (a TLS 1.3 record's content type) into
    // out[0..len + 1), not overlapping in, and writes the tag: a record sealed straight from
    // the buffer its data was read into, with no copy into the record first (h18q: that copy
    // was 12.6% of the encrypted sender's samples, perf). The same function as seal() of the
    // len + 1 bytes in place.
    void seal_from(const unsigned char nonce[kNonceBytes], const unsigned char* aad, size_t aad_len, const unsigned char* in,
                   size_t len, unsigned char last, unsigned char* out, unsigned char tag[kTagBytes]);
    // Decrypts in[0..len) into out (the same place or not overlapping) and checks tag: false
    // when it does not match (out then holds bytes that must not be used).
    bool open(const unsigned char nonce[kNonceBytes], const unsigned char* aad, size_t aad_len, const unsigned char* in,
              unsigned char* out, size_t len, const unsigned char tag[kTagBytes]);

    struct IpsecKey; // the expanded key and GHASH tables (aes_gcm_ipsec.cpp)

private:
    GcmEngine engine_;
    EVP_CIPHER_CTX* evp_ = nullptr;
    std::unique_ptr<IpsecKey, void (*)(IpsecKey*)> ipsec_{nullptr, nullptr};
};

} // namespace sluice::tls
