#include "core/tls/keys.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <vector>

#include "sluice/error.hpp"

namespace sluice::tls {

namespace {

Secret hmac_sha256(std::span<const unsigned char> key, std::span<const unsigned char> data) {
    Secret out{};
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), out.data(), &len) ||
        len != out.size())
        throw Error(ErrorCode::internal, "HMAC-SHA256 failed");
    return out;
}

// HKDF-Expand for at most one hash length: T(1) = HMAC(prk, info || 0x01).
void hkdf_expand(std::span<const unsigned char> prk, std::span<const unsigned char> info, std::span<unsigned char> out) {
    if (out.size() > kSecretBytes) throw Error(ErrorCode::internal, "HKDF-Expand: more than one block asked for");
    std::vector<unsigned char> msg(info.begin(), info.end());
    msg.push_back(1);
    Secret t = hmac_sha256(prk, msg);
    std::copy_n(t.begin(), out.size(), out.begin());
}

void put16(std::vector<unsigned char>& v, uint16_t x) {
    v.push_back(static_cast<unsigned char>(x));
    v.push_back(static_cast<unsigned char>(x >> 8));
}

} // namespace

Psk derive_psk(const std::string& token, const PskContext& c) {
    // The salt is the context, length-free because every part has a fixed size on the wire.
    std::vector<unsigned char> salt;
    salt.insert(salt.end(), c.server_nonce.begin(), c.server_nonce.end());
    salt.insert(salt.end(), c.client_nonce.begin(), c.client_nonce.end());
    salt.insert(salt.end(), c.transfer_id.begin(), c.transfer_id.end());
    salt.push_back(c.role);
    put16(salt, c.stream_index);
    put16(salt, c.server_features);
    salt.push_back(c.client_features);
    Secret prk = hmac_sha256(salt, std::span(reinterpret_cast<const unsigned char*>(token.data()), token.size()));
    static constexpr std::string_view kInfo = "sluice tls13 psk v1";
    Psk psk{};
    hkdf_expand(prk, std::span(reinterpret_cast<const unsigned char*>(kInfo.data()), kInfo.size()), psk);
    return psk;
}

Psk resumed_psk(const Secret& session, const Psk& control, const Psk& stream) {
    static constexpr std::string_view kLabel = "sluice tls13 resumed v1";
    std::vector<unsigned char> msg(kLabel.begin(), kLabel.end());
    msg.insert(msg.end(), control.begin(), control.end());
    msg.insert(msg.end(), stream.begin(), stream.end());
    return hmac_sha256(session, msg);
}

void hkdf_expand_label(std::span<const unsigned char> secret, const std::string& label, std::span<unsigned char> out) {
    const std::string full = "tls13 " + label;
    std::vector<unsigned char> info;
    info.push_back(static_cast<unsigned char>(out.size() >> 8));
    info.push_back(static_cast<unsigned char>(out.size()));
    info.push_back(static_cast<unsigned char>(full.size()));
    info.insert(info.end(), full.begin(), full.end());
    info.push_back(0); // empty context
    hkdf_expand(secret, info, out);
}

TrafficKey traffic_key(std::span<const unsigned char> secret) {
    TrafficKey k;
    hkdf_expand_label(secret, "key", k.key);
    hkdf_expand_label(secret, "iv", k.iv);
    return k;
}

} // namespace sluice::tls
