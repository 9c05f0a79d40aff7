#pragma once
// When a connection is encrypted (docs/protocol.md, "Encryption"), and the PSK of a sluice
// hello: what both sides decide alike from what both have seen.
#include <sys/socket.h>

#include <span>
#include <string>

#include "core/tls/keys.hpp"
#include "core/wire/protocol.hpp"
#include "sluice/sluice.hpp"

namespace sluice::tls {

bool is_loopback(const sockaddr_storage& peer);
// automatic: on unless the connected peer of fd is on a loopback address.
bool wants_encryption(Encrypt mode, const sockaddr_storage& peer);
bool wants_encryption(Encrypt mode, int connected_fd);
// Certificates given turn encryption on (they mean nothing in clear): mode, or on. Throws
// usage when mode is off.
Encrypt with_certificates(Encrypt mode, const Certificates& c);

// The PSK of the connection whose hellos these are (keys.hpp, PskContext).
Psk hello_psk(const std::string& token, std::span<const unsigned char> server_nonce, uint16_t server_features,
              const wire::ClientHello& h);

// Says which side refused and which option changes it: from the sender's side (we_encrypt:
// the sender's setting) or the receiver's.
std::string mismatch_text_for_sender(const std::string& peer, bool we_encrypt);
std::string mismatch_text_for_receiver(const std::string& source, bool we_encrypt);

} // namespace sluice::tls
