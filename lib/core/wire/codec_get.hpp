#pragma once
// Get sessions (issue 15): a client asks `sluice serve` for a file or tree over sluice's
// protocol. Four frames on one TCP connection to the server's sluice port, types 0x60-0x63
// (docs/protocol.md, "Get sessions"). After GET_REPLY says yes, the server sends the data as
// an ordinary transfer (handshake, MANIFEST, BLOCKs on N streams, resume, checksums) to the
// receiver the client started, and ends this connection with GET_DONE.
#include <array>
#include <cstdint>
#include <string>

#include "core/wire/codec.hpp"
#include "core/wire/protocol.hpp"

namespace sluice::wire {

inline constexpr uint8_t kGetHello = 0x60;   // server -> client: version, features, nonce
inline constexpr uint8_t kGetRequest = 0x61; // client -> server: what to send, where, MAC
inline constexpr uint8_t kGetReply = 0x62;   // server -> client: yes or why not, server's MAC
inline constexpr uint8_t kGetDone = 0x63;    // server -> client: how the transfer ended
inline constexpr uint8_t kGetAttach = 0x64;  // client -> server, instead of GET_REQUEST: this connection is a stream of that get
// client -> server, instead of GET_REQUEST (h15s): `sluice send` asks to push into the served
// directory. GET_REQUEST's payload; the MAC covers this frame's own header, so a get request
// cannot be replayed as a push. Answered with GET_REPLY; the transfer's connections then come
// with GET_ATTACH and the server's receiver answers them (docs/protocol.md, "Pushes").
inline constexpr uint8_t kPushRequest = 0x65;
inline constexpr uint32_t kMaxGetPayload = 16384;
inline constexpr uint16_t kFeatureGetSessions = 1u << 5; // the brief's bit 5 (both hellos)
// GET_HELLO bit 6 (issue 18, h18o): the server has a certificate on this port (serve --cert/--key).
// A client that verifies servers (get --ca/--pin) then begins a TLS 1.3 handshake on the request
// connection instead of sending GET_REQUEST, and every later frame on it is in TLS records; a
// client that sees no bit refuses (no fallback to an unauthenticated request).
inline constexpr uint16_t kFeatureGetCertificate = 1u << 6;
// The first byte of a TLS record carrying a handshake (RFC 8446 5.1): what the server reads first
// on a request connection whose client begins TLS; never a get frame's type (0x60-0x64).
inline constexpr uint8_t kTlsHandshakeRecord = 0x16;
inline constexpr size_t kMaxReceiverTokenBytes = 128;
// GET_REQUEST features: what the client's receiver chose about encryption (h15i), so a
// server that sends with send() (a session thread) makes the same choice; neither bit: a
// client from before, whose receiver decides by address (automatic) as the server does.
inline constexpr uint8_t kGetEncrypted = 1u << 0;
inline constexpr uint8_t kGetClear = 1u << 1;
// Bound transfer tokens (h18p). GET_HELLO bit 7: the server keys a get's transfer with
// transfer_token() (auth.hpp), never with the receiver_token the request carries in clear, and
// MACs its GET_REPLY over the GET_HELLO features it sent (get_reply_mac). GET_REQUEST bit 7: the
// client knows this; it checks the reply's MAC over the features it saw, so a hello whose offer
// was removed on the way fails the get before any stream. Only with a token (not --public).
inline constexpr uint16_t kFeatureGetBoundTransfer = 1u << 7;
inline constexpr uint8_t kGetBoundTransfer = 1u << 7;
// GET_HELLO bit 8 (h15s): the server understands PUSH_REQUEST (whether it takes pushes is its
// reply's to say). A sender that reads a hello without it refuses before sending anything.
inline constexpr uint16_t kFeatureGetPush = 1u << 8;
// GET_HELLO bit 9 (h15o): with bit 6, the server also takes PUSH_REQUEST inside certificate
// mode's records (a serve from before answered one there with a refusal). A sender that
// verifies the server (send --ca/--pin) and reads a hello without it refuses before its handshake.
inline constexpr uint16_t kFeatureGetPushCertificate = 1u << 9;

struct GetHello {
    uint16_t version = kVersion;
    uint16_t features = kFeatureGetSessions;
    bool token_required = true; // false: a --public server, no MACs either way
    std::array<unsigned char, kNonceBytes> nonce{};
};

struct GetRequest {
    uint16_t version = kVersion;
    uint8_t features = static_cast<uint8_t>(kFeatureGetSessions);
    uint16_t streams = 0;    // data streams the server should open (1..kMaxStreams)
    uint16_t reply_port = 0; // the client's receiver listens here, at the address it connected from; 0: the
                             // client connects its transfer's connections out (GET_ATTACH), none back
    std::array<unsigned char, kNonceBytes> nonce{};
    std::string receiver_token; // admits the server's sender to that receiver
    std::string path;           // relative to the served directory; empty: all of it
    std::array<unsigned char, kMacBytes> mac{}; // HMAC of the server's token (zeros when the server is public)
};

// certificate_required (h18o): the server verifies its clients' certificates (serve --ca/--pin)
// and this request came in clear; a client from before reads it as an unknown status (refused too).
enum class GetStatus : uint8_t {
    ok = 0,
    bad_token = 1,
    not_found = 2,
    busy = 3,
    bad_request = 4,
    missing_feature = 5,
    certificate_required = 6,
};
const char* get_status_text(GetStatus s);

struct GetReply {
    GetStatus status = GetStatus::ok;
    std::array<unsigned char, kMacBytes> mac{}; // proves the server holds the token (zeros when public)
    uint64_t files = 0, bytes = 0;              // what will be sent (ok only)
    std::string message;
};

struct GetDone {
    uint32_t status = 0; // 0: the receiver verified everything
    std::string message;
};

void encode_get_hello(Bytes& out, const GetHello& h);
void encode_get_request(Bytes& out, const GetRequest& r);
// PUSH_REQUEST: GET_REQUEST's payload under type kPushRequest (reply_port 0, path empty).
void encode_push_request(Bytes& out, const GetRequest& r);
void encode_get_reply(Bytes& out, const GetReply& r);
void encode_get_done(Bytes& out, const GetDone& d);
// GET_ATTACH: the nonce of the GET_REQUEST whose transfer this connection joins.
void encode_get_attach(Bytes& out, const std::array<unsigned char, kNonceBytes>& request_nonce);
std::array<unsigned char, kNonceBytes> decode_get_attach(Span payload);
GetHello decode_get_hello(Span payload);
GetRequest decode_get_request(Span payload);
GetReply decode_get_reply(Span payload);
GetDone decode_get_done(Span payload);
// The part of an encoded GET_REQUEST frame (header included) its MAC covers.
Span get_request_signed_part(Span encoded_frame);

// Checks a get frame's 8-byte header: the expected type, no flags, at most kMaxGetPayload.
uint32_t decode_get_frame_header(Span header, uint8_t expected_type);
// The same for the first frame a client sends: GET_REQUEST, PUSH_REQUEST or GET_ATTACH (*type says which).
uint32_t decode_get_first_header(Span header, uint8_t* type);

} // namespace sluice::wire
