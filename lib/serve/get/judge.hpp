#pragma once
// A get request read (by the get ring: ring_request.hpp), and what the server answers it:
// the checks both paths share (busy, version, features, the token's MAC, the path, the
// attachments' slot), so the ring and a session thread refuse alike and with the same words.
#include <memory>
#include <string>

#include "core/io/unique_fd.hpp"
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
    std::string why_thread; // why a session thread sends it (said in -v); empty on the ring
    Admission admission;    // a session thread's place under --max-gets, given back with it
    // Certificate mode: the client began TLS instead of a frame (ring_request.hpp); the thread
    // runs the handshake, then reads the request through the records (get_session.cpp).
    bool tls = false;
    std::string client_spki; // certificate mode: "sha256:HEX" of the client's key, if it showed a certificate
    bool push = false;       // a PUSH_REQUEST (h15s): `sluice send` into DIR, for serve/get/push_sessions.hpp
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
// notify: the eventfd of the ring that will run the get (-1 for a session thread).
Judged judge(Shared& sh, Attachments& att, const Asked& a, bool busy, int notify = -1, bool walk = true);

wire::Bytes encode_reply(const wire::GetReply& r);

} // namespace sluice::serve
