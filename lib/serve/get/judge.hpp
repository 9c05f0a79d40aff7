#pragma once
// A get request read (by the get ring: ring_request.hpp), and what the server answers it:
// the checks (busy, version, features, the token's MAC, the path, the attachments' slot), made
// on the ring, and again with a tree's walk on its pool, alike and with the same words.
#include <memory>
#include <string>

#include "core/io/unique_fd.hpp"
#include "core/tls/record.hpp"
#include "core/wire/codec_get.hpp"
#include "serve/get/admission.hpp"
#include "serve/get/attachments.hpp"
#include "serve/get/sources.hpp"

namespace sluice::serve {

struct Shared;

// One GET_REQUEST as the ring read it, with its connection.
struct Asked {
    UniqueFd fd;
    wire::GetHello hello; // what the server said first: its nonce is what the request's MAC covers
    wire::Bytes frame;    // the whole GET_REQUEST frame, for its MAC
    wire::GetRequest q;
    std::string host;     // the request's address (numeric); empty when getpeername failed
    uint16_t peer_port = 0;
    uint32_t rtt_us = 0;  // the TCP handshake's round trip: deadlines scale with it
    Admission admission; // certificate mode: the place under --max-gets taken before the handshake
    // Certificate mode: the client began TLS instead of a frame, and the ring ran the handshake
    // and read the request through records (ring_request_tls.cpp).
    bool tls = false;
    std::string client_spki; // certificate mode: "sha256:HEX" of the client's key, if it showed a certificate
    bool push = false;       // a PUSH_REQUEST (h15s): `sluice send` into DIR, for serve/get/push_sessions.hpp
    // Certificate mode, a push's: seals what the push's thread answers on the request
    // connection (RingRequest::take_sealer; encode_reply).
    std::unique_ptr<tls::Sealer> sealer;
};

struct Judged {
    wire::GetReply reply;                    // ok, or the refusal and why
    GetSources src;                          // ok: what to send
    std::unique_ptr<Attachments::Slot> slot; // ok without --connect-back: where the client's connections arrive
    bool tree = false;                       // !walk: the path is a directory, not walked yet (nothing else set)
    std::string transfer_token;              // keys the transfer: derived when bound (h18p), else receiver_token
};

// The address and port fd's peer has (host empty when unknown).
struct PeerAddress {
    std::string host;
    uint16_t port = 0;
};
PeerAddress peer_address(int fd);
bool loopback_host(const std::string& host);

// Checks a.q and, when it passes, opens what it names (a file, or every entry of a tree) and
// the attachments' slot. walk false: a directory is not walked (its walk may wait for the
// disk: the ring hands it to its pool): tree is set instead, and nothing else. Never throws for the client's faults (they are the reply); may throw for the
// server's own (an fd table full while opening): the caller closes the connection then.
// notify: the eventfd of the ring that will run the get (-1: none).
Judged judge(Shared& sh, Attachments& att, const Asked& a, bool busy, int notify = -1, bool walk = true);

// sealer: certificate mode's request connection, whose reply travels in records.
wire::Bytes encode_reply(const wire::GetReply& r, tls::Sealer* sealer = nullptr);

} // namespace sluice::serve
