#include "core/tls/aes_gcm.hpp"

#include <openssl/crypto.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/tls/aes_gcm_ipsec.hpp"
#include "sluice/error.hpp"

namespace sluice::tls {

namespace {

constexpr const char* kEnv = "SLUICE_RECORD_ENGINE";

GcmChoice choose() {
    const std::string openssl = std::string(OpenSSL_version(OPENSSL_VERSION)) + " EVP";
    std::string about;
    const bool ipsec = ipsec::usable(about);
    const char* forced = std::getenv(kEnv);
    const std::string want = forced ? forced : "";
    if (want == "openssl") return {GcmEngine::openssl, "openssl", openssl + " (" + kEnv + "=openssl)"};
    if (want == "ipsec-mb") {
        if (!ipsec) throw Error(ErrorCode::usage, std::string(kEnv) + "=ipsec-mb cannot run here: " + about);
        return {GcmEngine::ipsec_mb, "ipsec-mb", about + " (" + kEnv + "=ipsec-mb)"};
    }
    if (!want.empty())
        throw Error(ErrorCode::usage, std::string(kEnv) + "=" + want + ": not an engine (openssl or ipsec-mb)");
    if (ipsec) return {GcmEngine::ipsec_mb, "ipsec-mb", about};
    return {GcmEngine::openssl, "openssl", openssl + "; not ipsec-mb: " + about};
}

} // namespace

const GcmChoice& gcm_choice() {
    static std::mutex mu;
    static std::unique_ptr<GcmChoice> chosen;
    std::lock_guard lk(mu);
    if (!chosen) chosen = std::make_unique<GcmChoice>(choose()); // a refusal is not kept: asked again, refused again
    return *chosen;
}

bool ipsec_mb_usable(std::string& why) { return ipsec::usable(why); }

AesGcm::AesGcm(const unsigned char key[kKeyBytes], bool encrypt, GcmEngine engine) : engine_(engine) {
    if (engine_ == GcmEngine::ipsec_mb) {
        std::string why;
        if (!ipsec::usable(why)) throw Error(ErrorCode::internal, "AES-128-GCM: ipsec-mb cannot run here: " + why);
        ipsec_ = {ipsec::make_key(key), ipsec::free_key};
        return;
    }
    evp_ = EVP_CIPHER_CTX_new();
    if (!evp_) throw Error(ErrorCode::internal, "OpenSSL: cannot allocate a cipher context");
    // The key schedule is computed once here; each record only sets its nonce.
    const int ok = encrypt ? EVP_EncryptInit_ex(evp_, EVP_aes_128_gcm(), nullptr, key, nullptr)
                           : EVP_DecryptInit_ex(evp_, EVP_aes_128_gcm(), nullptr, key, nullptr);
    if (ok != 1) {
        EVP_CIPHER_CTX_free(evp_);
        throw Error(ErrorCode::internal, "OpenSSL: AES-128-GCM set-up failed");
    }
}

AesGcm::~AesGcm() { EVP_CIPHER_CTX_free(evp_); }

void AesGcm::seal(const unsigned char nonce[kNonceBytes], const unsigned char* aad, size_t aad_len, unsigned char* data,
                  size_t len, unsigned char tag[kTagBytes]) {
    if (ipsec_) return ipsec::seal(*ipsec_, nonce, aad, aad_len, data, len, tag);
    int n = 0;
    if (EVP_EncryptInit_ex(evp_, nullptr, nullptr, nullptr, nonce) != 1 ||
        EVP_EncryptUpdate(evp_, nullptr, &n, aad, static_cast<int>(aad_len)) != 1 ||
        EVP_EncryptUpdate(evp_, data, &n, data, static_cast<int>(len)) != 1 || EVP_EncryptFinal_ex(evp_, data + n, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl(evp_, EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) != 1)
        throw Error(ErrorCode::internal, "OpenSSL: AES-128-GCM encryption failed");
}

void AesGcm::seal_from(const unsigned char nonce[kNonceBytes], const unsigned char* aad, size_t aad_len,
                       const unsigned char* in, size_t len, unsigned char last, unsigned char* out, unsigned char tag[kTagBytes]) {
    if (ipsec_) return ipsec::seal_from(*ipsec_, nonce, aad, aad_len, in, len, last, out, tag);
    int n = 0, m = 0;
    if (EVP_EncryptInit_ex(evp_, nullptr, nullptr, nullptr, nonce) != 1 ||
        EVP_EncryptUpdate(evp_, nullptr, &n, aad, static_cast<int>(aad_len)) != 1 ||
        EVP_EncryptUpdate(evp_, out, &n, in, static_cast<int>(len)) != 1 ||
        EVP_EncryptUpdate(evp_, out + n, &m, &last, 1) != 1 || EVP_EncryptFinal_ex(evp_, out + n + m, &m) != 1 ||
        EVP_CIPHER_CTX_ctrl(evp_, EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) != 1)
        throw Error(ErrorCode::internal, "OpenSSL: AES-128-GCM encryption failed");
}

bool AesGcm::open(const unsigned char nonce[kNonceBytes], const unsigned char* aad, size_t aad_len,
                  const unsigned char* in, unsigned char* out, size_t len, const unsigned char tag[kTagBytes]) {
    if (ipsec_) return ipsec::open(*ipsec_, nonce, aad, aad_len, in, out, len, tag);
    unsigned char expected[kTagBytes];
    std::memcpy(expected, tag, kTagBytes); // EVP takes a non-const tag
    int n = 0;
    if (EVP_DecryptInit_ex(evp_, nullptr, nullptr, nullptr, nonce) != 1 ||
        EVP_DecryptUpdate(evp_, nullptr, &n, aad, static_cast<int>(aad_len)) != 1 ||
        EVP_DecryptUpdate(evp_, out, &n, in, static_cast<int>(len)) != 1 ||
        EVP_CIPHER_CTX_ctrl(evp_, EVP_CTRL_GCM_SET_TAG, kTagBytes, expected) != 1)
        throw Error(ErrorCode::internal, "OpenSSL: AES-128-GCM decryption failed");
    return EVP_DecryptFinal_ex(evp_, out + n, &n) == 1;
}

} // namespace sluice::tls
