#include "core/wire/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include "core/io/sys_error.hpp"

namespace sluice::wire {

namespace {

Mac hmac(const std::string& key, std::string_view label, std::span<const unsigned char> a, std::span<const unsigned char> b) {
    Mac out{};
    unsigned int len = 0;
    HMAC_CTX* ctx = HMAC_CTX_new();
    if (!ctx) throw Error(ErrorCode::internal, "HMAC_CTX_new failed");
    bool ok = HMAC_Init_ex(ctx, key.data(), static_cast<int>(key.size()), EVP_sha256(), nullptr) == 1 &&
              HMAC_Update(ctx, reinterpret_cast<const unsigned char*>(label.data()), label.size()) == 1 &&
              HMAC_Update(ctx, a.data(), a.size()) == 1 && HMAC_Update(ctx, b.data(), b.size()) == 1 &&
              HMAC_Final(ctx, out.data(), &len) == 1;
    HMAC_CTX_free(ctx);
    if (!ok || len != out.size()) throw Error(ErrorCode::internal, "HMAC-SHA256 failed");
    return out;
}

// Tokens are text (a URL's ?token=, a token file): lowercase hex of random or derived bytes.
std::string hex_of(std::span<const unsigned char> bytes) {
    static const char* hex = "0123456789abcdef";
    std::string t;
    for (unsigned char c : bytes) {
        t.push_back(hex[c >> 4]);
        t.push_back(hex[c & 15]);
    }
    return t;
}

} // namespace

void random_bytes(std::span<unsigned char> out) {
    size_t got = 0;
    while (got < out.size()) {
        ssize_t n = ::getrandom(out.data() + got, out.size() - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_errno(ErrorCode::internal, "getrandom");
        }
        got += static_cast<size_t>(n);
    }
}

std::string random_token() {
    std::array<unsigned char, 16> b{};
    random_bytes(b);
    return hex_of(b);
}

Mac client_hello_mac(const std::string& token, std::span<const unsigned char> server_nonce,
                     std::span<const unsigned char> hello_signed_part) {
    return hmac(token, "sluice-v1 client hello", server_nonce, hello_signed_part);
}

Mac server_auth_mac(const std::string& token, std::span<const unsigned char> client_nonce,
                    std::span<const unsigned char> server_nonce) {
    return hmac(token, "sluice-v1 server auth", client_nonce, server_nonce);
}

Mac get_reply_mac(const std::string& token, std::span<const unsigned char> client_nonce,
                  std::span<const unsigned char> server_nonce, uint16_t hello_features) {
    std::array<unsigned char, kNonceBytes + 2> tail{};
    if (server_nonce.size() != kNonceBytes) throw Error(ErrorCode::internal, "get_reply_mac: nonce size");
    std::copy(server_nonce.begin(), server_nonce.end(), tail.begin());
    tail[kNonceBytes] = static_cast<unsigned char>(hello_features & 0xff); // little-endian, as it travels
    tail[kNonceBytes + 1] = static_cast<unsigned char>(hello_features >> 8);
    return hmac(token, "sluice-v1 get reply bound", client_nonce, tail);
}

std::string get_transfer_token(const std::string& token, std::span<const unsigned char> request_nonce,
                               const std::string& receiver_token) {
    Mac m = hmac(token, "sluice-v1 get transfer", request_nonce,
                 std::span(reinterpret_cast<const unsigned char*>(receiver_token.data()), receiver_token.size()));
    return hex_of(m);
}

bool macs_equal(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

} // namespace sluice::wire
