// Built where meson found no intel-ipsec-mb: the record layer runs on OpenSSL, and -v and the
// stats say why (aes_gcm.hpp).
#include "core/tls/aes_gcm_ipsec.hpp"
#include "sluice/error.hpp"

namespace sluice::tls {

struct AesGcm::IpsecKey {};

namespace ipsec {

bool usable(std::string& about) {
    about = "this build has no intel-ipsec-mb (libipsec-mb-dev was not found when it was configured)";
    return false;
}

// Unreachable: gcm_choice() never picks an engine usable() refused.
AesGcm::IpsecKey* make_key(const unsigned char*) { throw Error(ErrorCode::internal, "intel-ipsec-mb is not built in"); }
void free_key(AesGcm::IpsecKey* k) { delete k; }
void seal(const AesGcm::IpsecKey&, const unsigned char*, const unsigned char*, size_t, unsigned char*, size_t,
          unsigned char*) {
    throw Error(ErrorCode::internal, "intel-ipsec-mb is not built in");
}
void seal_from(const AesGcm::IpsecKey&, const unsigned char*, const unsigned char*, size_t, const unsigned char*, size_t,
               unsigned char, unsigned char*, unsigned char*) {
    throw Error(ErrorCode::internal, "intel-ipsec-mb is not built in");
}
bool open(const AesGcm::IpsecKey&, const unsigned char*, const unsigned char*, size_t, const unsigned char*,
          unsigned char*, size_t, const unsigned char*) {
    throw Error(ErrorCode::internal, "intel-ipsec-mb is not built in");
}

} // namespace ipsec
} // namespace sluice::tls
