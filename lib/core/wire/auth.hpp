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
// Get sessions with bound transfer tokens (h18p, docs/protocol.md "Get sessions"): GET_REPLY's
// MAC, over the client's nonce, the server's and the GET_HELLO features word the server sent, so
// an offer removed from the hello on the way is seen by the client.
Mac get_reply_mac(const std::string& token, std::span<const unsigned char> client_nonce,
                  std::span<const unsigned char> server_nonce, uint16_t hello_features);
// The token that keys the get's transfer (its hellos' MACs and TLS PSKs): 64 hex characters of
// HMAC(server token, label || request nonce || receiver_token). Whoever reads the request in
// clear learns receiver_token, but not this without the server's token.
std::string get_transfer_token(const std::string& token, std::span<const unsigned char> request_nonce,
                               const std::string& receiver_token);
bool macs_equal(const Mac& a, const Mac& b);

} // namespace sluice::wire
