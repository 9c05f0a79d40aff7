#pragma once
// Pushing into `sluice serve DIR --port P --allow-upload` (h15s; docs/protocol.md, "Pushes"):
// the serve's port greets every connection with GET_HELLO where a receiver sends ServerHello,
// so a sender that finds one asks for a push on that connection (PUSH_REQUEST, MACed with the
// token), checks the reply (and its MAC), and from then on opens every connection of the
// transfer through the serve: connect, read GET_HELLO, send GET_ATTACH with the request's
// nonce, then the usual handshake with the server's receiver, keyed by the transfer token both
// sides derive from the token (never sent).
#include <functional>
#include <string>

#include "core/tls/cert.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

// fd's first byte, read without taking it (MSG_PEEK, under fd's receive timeout), is a
// GET_HELLO's: `to` is a sluice serve's port, not a receiver. False on anything else,
// including an error (the handshake then reports it).
bool is_serve_port(int fd);

struct PushGrant {
    std::string transfer_token;   // keys the transfer's handshakes (and TLS PSKs)
    std::function<int()> connect; // opens one connection of the transfer (SendOptions::connection)
    std::string server_spki;      // certificate mode: the key the request's handshake verified
};

// On fd (a serve's port, its GET_HELLO unread): asks to push `streams` data streams, in clear
// or encrypted as `encrypted` says. Throws Error naming peer and the server's reason when it
// refuses (auth: uploads off, wrong token; network: busy), or when its hello offers no pushes
// (a serve from before them) or its reply's MAC fails (auth).
// certs (certificate mode, SendOptions::certificates): first a TLS 1.3 handshake on fd that
// verifies the server's certificate (and shows ours), then the request and reply in its
// records; refused before the handshake when the hello offers no certificate or no pushes in
// certificate mode (bits 6, 9).
PushGrant ask_to_push(int fd, const Endpoint& to, const SendOptions& opts, unsigned streams, bool encrypted,
                      const std::string& peer, const tls::CertContext* certs = nullptr);

} // namespace sluice
