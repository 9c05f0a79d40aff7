#pragma once
// Keys of an encrypted connection (docs/protocol.md, "Encryption"): the external PSK each
// connection's TLS 1.3 handshake is keyed with, derived from the token and bound to that
// connection's handshake, and the record keys TLS 1.3 derives from its traffic secrets.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace sluice::tls {

// TLS_AES_128_GCM_SHA256, the one cipher suite offered (WDT's default cipher too), checked
// after every handshake (ssl_run.cpp); Stats::tls_cipher.
inline constexpr const char* kCipherSuite = "TLS_AES_128_GCM_SHA256";
inline constexpr size_t kKeyBytes = 16;
inline constexpr size_t kIvBytes = 12;
inline constexpr size_t kTagBytes = 16;
inline constexpr size_t kSecretBytes = 32; // SHA-256

using Psk = std::array<unsigned char, kSecretBytes>;
using Secret = std::array<unsigned char, kSecretBytes>;

struct TrafficKey {
    std::array<unsigned char, kKeyBytes> key{};
    std::array<unsigned char, kIvBytes> iv{};
};

// Both directions of one connection, as this side sees them.
struct LinkKeys {
    TrafficKey tx;
    TrafficKey rx;
};

// What a connection's PSK is bound to: both nonces of the sluice handshake, the transfer id,
// the connection's role and stream index, and both feature words. A recorded handshake
// replayed elsewhere, a hello altered in flight (a feature bit cleared), or a connection
// spliced into another transfer yields a different PSK and fails the TLS handshake.
struct PskContext {
    std::span<const unsigned char> server_nonce;
    std::span<const unsigned char> client_nonce;
    std::span<const unsigned char> transfer_id;
    uint8_t role = 0;
    uint16_t stream_index = 0;
    uint16_t server_features = 0;
    uint8_t client_features = 0;
};

// HKDF-SHA256 (RFC 5869): PSK = Expand(Extract(salt = the context, ikm = token), "sluice tls13 psk v1").
Psk derive_psk(const std::string& token, const PskContext& ctx);

// Certificate mode (cert.hpp): a data stream's PSK, keyed from the control connection's TLS
// exporter secret and bound to both connections' hellos (so to the token, and to the control
// connection's hello, which its certificate handshake does not cover):
// HMAC-SHA256(session, "sluice tls13 resumed v1" || control PSK || stream PSK).
Psk resumed_psk(const Secret& session, const Psk& control, const Psk& stream);

// RFC 8446 7.3: the record key and IV of a TLS 1.3 application traffic secret.
TrafficKey traffic_key(std::span<const unsigned char> secret);

// HKDF-Expand-Label (RFC 8446 7.1) with SHA-256, out at most 32 bytes.
void hkdf_expand_label(std::span<const unsigned char> secret, const std::string& label, std::span<unsigned char> out);

} // namespace sluice::tls
