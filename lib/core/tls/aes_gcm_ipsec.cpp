#include "core/tls/aes_gcm_ipsec.hpp"

#include <intel-ipsec-mb.h>
#include <openssl/crypto.h>

#include <memory>
#include <mutex>

#include "sluice/error.hpp"

namespace sluice::tls {

// gcm_key_data is declared 64-byte aligned: operator new honours that (C++17).
struct AesGcm::IpsecKey {
    gcm_key_data key;
};

namespace ipsec {

namespace {

struct MgrFree {
    void operator()(IMB_MGR* m) const { free_mb_mgr(m); }
};

// One manager for the process, set up once and only read after: the direct GCM calls used
// here keep their state in the caller's key and context, so threads share it.
struct Manager {
    std::unique_ptr<IMB_MGR, MgrFree> mgr;
    bool vaes = false;
    std::string about;
};

const Manager& manager() {
    static Manager m;
    static std::once_flag once;
    std::call_once(once, [] {
        m.mgr.reset(alloc_mb_mgr(0));
        const std::string version = std::string("intel-ipsec-mb ") + imb_get_version_str();
        if (!m.mgr) {
            m.about = version + " could not set up its manager";
            return;
        }
        IMB_ARCH arch = IMB_ARCH_NONE;
        init_mb_mgr_auto(m.mgr.get(), &arch);
        const uint64_t need = IMB_FEATURE_VAES | IMB_FEATURE_VPCLMULQDQ;
        m.vaes = arch == IMB_ARCH_AVX512 && (m.mgr->features & need) == need;
        m.about = m.vaes ? version + ", AVX-512 with VAES and VPCLMULQDQ"
                         : version + " found no AVX-512 with VAES and VPCLMULQDQ on this CPU";
    });
    return m;
}

IMB_MGR* mgr() { return manager().mgr.get(); }

} // namespace

bool usable(std::string& about) {
    const Manager& m = manager();
    about = m.about;
    return m.vaes;
}

AesGcm::IpsecKey* make_key(const unsigned char key[AesGcm::kKeyBytes]) {
    auto* k = new AesGcm::IpsecKey{};
    IMB_AES128_GCM_PRE(mgr(), key, &k->key);
    return k;
}

void free_key(AesGcm::IpsecKey* k) {
    if (!k) return;
    OPENSSL_cleanse(k, sizeof *k);
    delete k;
}

void seal(const AesGcm::IpsecKey& k, const unsigned char nonce[AesGcm::kNonceBytes], const unsigned char* aad,
          size_t aad_len, unsigned char* data, size_t len, unsigned char tag[AesGcm::kTagBytes]) {
    gcm_context_data ctx;
    IMB_AES128_GCM_ENC(mgr(), &k.key, &ctx, data, data, len, nonce, aad, aad_len, tag, AesGcm::kTagBytes);
}

void seal_from(const AesGcm::IpsecKey& k, const unsigned char nonce[AesGcm::kNonceBytes], const unsigned char* aad,
               size_t aad_len, const unsigned char* in, size_t len, unsigned char last, unsigned char* out,
               unsigned char tag[AesGcm::kTagBytes]) {
    gcm_context_data ctx;
    IMB_AES128_GCM_INIT(mgr(), &k.key, &ctx, nonce, aad, aad_len);
    IMB_AES128_GCM_ENC_UPDATE(mgr(), &k.key, &ctx, out, in, len);
    IMB_AES128_GCM_ENC_UPDATE(mgr(), &k.key, &ctx, out + len, &last, 1);
    IMB_AES128_GCM_ENC_FINALIZE(mgr(), &k.key, &ctx, tag, AesGcm::kTagBytes);
}

bool open(const AesGcm::IpsecKey& k, const unsigned char nonce[AesGcm::kNonceBytes], const unsigned char* aad,
          size_t aad_len, const unsigned char* in, unsigned char* out, size_t len,
          const unsigned char tag[AesGcm::kTagBytes]) {
    gcm_context_data ctx;
    unsigned char computed[AesGcm::kTagBytes];
    IMB_AES128_GCM_DEC(mgr(), &k.key, &ctx, out, in, len, nonce, aad, aad_len, computed, AesGcm::kTagBytes);
    // Constant time: how many tag bytes matched must not show in the time taken.
    return CRYPTO_memcmp(computed, tag, AesGcm::kTagBytes) == 0;
}

} // namespace ipsec
} // namespace sluice::tls
