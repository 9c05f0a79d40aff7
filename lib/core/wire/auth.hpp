#pragma once
// Token authentication: each side proves it knows the token with an HMAC-SHA256 over the
// other side's fresh nonce, so the token never crosses the wire and a recorded handshake
// cannot be replayed.
#include <array>
#include <span>
#include <string>

#include "core/wire/protocol.hpp"

namespace sluice::wire {

using Mac = std::array<unsigned char, kMacBytes>;

void random_bytes(std::span<unsigned char> out);
std::string random_token(); // 32 hex characters

// MAC the sender puts in its ClientHello: over the receiver's nonce and the hello itself.
Mac client_hello_mac(const std::string& token, std::span<const unsigned char> server_nonce,
                     std::span<const unsigned char> hello_signed_part);
// MAC the receiver answers with: over the sender's nonce and its own, proving it holds the token too.
Mac server_auth_mac(const std::string& token, std::span<const unsigned char> client_nonce,
                    std::span<const unsigned char> server_nonce);
bool macs_equal(const Mac& a, const Mac& b);

} // namespace sluice::wire
