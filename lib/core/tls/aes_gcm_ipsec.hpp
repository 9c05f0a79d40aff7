#pragma once
// The ipsec-mb engine of aes_gcm.hpp, behind plain functions so that only its own file sees
// intel-ipsec-mb.h: aes_gcm_ipsec.cpp where the build found the library, aes_gcm_no_ipsec.cpp
// (which says so) where it did not.
#include <cstddef>
#include <string>

#include "core/tls/aes_gcm.hpp"

namespace sluice::tls::ipsec {

// Built with the library, and its multi-buffer manager found AVX-512 with VAES and
// VPCLMULQDQ on this CPU; else false and why. about: the library's version and path.
bool usable(std::string& about);
AesGcm::IpsecKey* make_key(const unsigned char key[AesGcm::kKeyBytes]);
void free_key(AesGcm::IpsecKey* k);
void seal(const AesGcm::IpsecKey& k, const unsigned char nonce[AesGcm::kNonceBytes], const unsigned char* aad,
          size_t aad_len, unsigned char* data, size_t len, unsigned char tag[AesGcm::kTagBytes]);
void seal_from(const AesGcm::IpsecKey& k, const unsigned char nonce[AesGcm::kNonceBytes], const unsigned char* aad,
               size_t aad_len, const unsigned char* in, size_t len, unsigned char last, unsigned char* out,
               unsigned char tag[AesGcm::kTagBytes]);
bool open(const AesGcm::IpsecKey& k, const unsigned char nonce[AesGcm::kNonceBytes], const unsigned char* aad,
          size_t aad_len, const unsigned char* in, unsigned char* out, size_t len,
          const unsigned char tag[AesGcm::kTagBytes]);

} // namespace sluice::tls::ipsec
