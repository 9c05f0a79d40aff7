// Get sessions' four frames (codec_get.hpp; docs/protocol.md, "Get sessions"). They travel
// only on a server's sluice port, before any transfer, so they have their own header check
// instead of widening decode_frame_header's table that every transfer's reader uses.
#include "core/wire/codec_get.hpp"

#include <algorithm>
#include <cstdio>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::bad;
using detail::begin_frame;
using detail::checked_message;
using detail::end_frame;
using detail::put_message;

namespace {

template <size_t N> void read_array(ByteReader& r, std::array<unsigned char, N>& a) {
    auto s = r.bytes(N);
    std::copy(s.begin(), s.end(), a.begin());
}

std::string short_string(ByteReader& r, size_t limit, const char* what) {
    uint16_t n = r.u16();
    if (n > limit) bad(std::string(what) + " of " + std::to_string(n) + " bytes exceeds the limit of " + std::to_string(limit));
    std::string s = r.string(n);
    if (s.find('\0') != std::string::npos) bad(std::string(what) + " holds a NUL byte");
    return s;
}

void put_short_string(ByteWriter& w, const std::string& s) {
    w.u16(static_cast<uint16_t>(s.size()));
    w.bytes(s);
}

const char* type_name(uint8_t t) {
    switch (t) {
    case kGetHello: return "GET_HELLO";
    case kGetRequest: return "GET_REQUEST";
    case kGetReply: return "GET_REPLY";
    case kGetDone: return "GET_DONE";
    case kGetAttach: return "GET_ATTACH";
    case kPushRequest: return "PUSH_REQUEST";
    }
    return "unknown";
}

} // namespace

const char* get_status_text(GetStatus s) {
    switch (s) {
    case GetStatus::ok: return "ok";
    case GetStatus::bad_token: return "authentication failed (wrong token)";
    case GetStatus::not_found: return "not found";
    case GetStatus::busy: return "the server is at its limit of get sessions";
    case GetStatus::bad_request: return "request refused";
    case GetStatus::missing_feature: return "a feature is missing";
    case GetStatus::certificate_required: return "a client certificate is required";
    }
    return "unknown status";
}

uint32_t decode_get_frame_header(Span header, uint8_t expected_type) {
    ByteReader r(header, "get frame header");
    uint8_t type = r.u8(), flags = r.u8();
    uint16_t reserved = r.u16();
    uint32_t length = r.u32();
    if (type != expected_type) {
        char b[8];
        std::snprintf(b, sizeof b, "%02x", type);
        bad(std::string("expected a ") + type_name(expected_type) + " frame, got type 0x" + b +
            " (not a sluice serve port, or a peer without get sessions?)");
    }
    if (flags != 0 || reserved != 0) bad(std::string("frame header: reserved bits set in a ") + type_name(type) + " frame");
    if (length > kMaxGetPayload)
        bad(std::string(type_name(type)) + " frame of " + std::to_string(length) + " bytes exceeds the limit of " +
            std::to_string(kMaxGetPayload));
    return length;
}

void encode_get_hello(Bytes& out, const GetHello& h) {
    size_t at = begin_frame(out, static_cast<FrameType>(kGetHello));
    ByteWriter w(out);
    w.bytes(kMagic.data(), kMagic.size());
    w.u16(h.version);
    w.u16(h.features);
    w.u8(h.token_required ? 1 : 0);
    w.bytes(h.nonce.data(), h.nonce.size());
    end_frame(out, at);
}

GetHello decode_get_hello(Span in) {
    ByteReader r(in, "GET_HELLO");
    auto m = r.bytes(kMagic.size());
    if (!std::equal(m.begin(), m.end(), kMagic.begin())) bad("GET_HELLO: bad magic (not a sluice peer)");
    GetHello h;
    h.version = r.u16();
    h.features = r.u16();
    uint8_t t = r.u8();
    if (t > 1) bad("GET_HELLO: token flag " + std::to_string(t));
    h.token_required = t == 1;
    read_array(r, h.nonce);
    r.expect_end();
    return h;
}

namespace {

void encode_request(Bytes& out, const GetRequest& q, uint8_t type) {
    size_t at = begin_frame(out, static_cast<FrameType>(type));
    ByteWriter w(out);
    w.u16(q.version);
    w.u8(q.features);
    w.u16(q.streams);
    w.u16(q.reply_port);
    w.bytes(q.nonce.data(), q.nonce.size());
    put_short_string(w, q.receiver_token);
    put_short_string(w, q.path);
    w.bytes(q.mac.data(), q.mac.size());
    end_frame(out, at);
}

} // namespace

void encode_get_request(Bytes& out, const GetRequest& q) { encode_request(out, q, kGetRequest); }
void encode_push_request(Bytes& out, const GetRequest& q) { encode_request(out, q, kPushRequest); }

Span get_request_signed_part(Span encoded_frame) {
    if (encoded_frame.size() < kMacBytes) bad("GET_REQUEST: shorter than its MAC");
    return encoded_frame.first(encoded_frame.size() - kMacBytes);
}

GetRequest decode_get_request(Span in) {
    ByteReader r(in, "GET_REQUEST");
    GetRequest q;
    q.version = r.u16();
    q.features = r.u8();
    q.streams = r.u16();
    q.reply_port = r.u16();
    read_array(r, q.nonce);
    q.receiver_token = short_string(r, kMaxReceiverTokenBytes, "GET_REQUEST: receiver token");
    q.path = short_string(r, kMaxPathBytes, "GET_REQUEST: path");
    read_array(r, q.mac);
    r.expect_end();
    if (q.streams == 0 || q.streams > kMaxStreams)
        bad("GET_REQUEST: " + std::to_string(q.streams) + " streams (1 to " + std::to_string(kMaxStreams) + ")");
    if (q.receiver_token.empty()) bad("GET_REQUEST: empty receiver token");
    if (!q.path.empty()) validate_relative_path(q.path);
    return q;
}

void encode_get_reply(Bytes& out, const GetReply& p) {
    size_t at = begin_frame(out, static_cast<FrameType>(kGetReply));
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(p.status));
    w.bytes(p.mac.data(), p.mac.size());
    w.u64(p.files);
    w.u64(p.bytes);
    put_message(w, p.message);
    end_frame(out, at);
}

GetReply decode_get_reply(Span in) {
    ByteReader r(in, "GET_REPLY");
    GetReply p;
    uint8_t s = r.u8();
    if (s > static_cast<uint8_t>(GetStatus::certificate_required)) bad("GET_REPLY: unknown status " + std::to_string(s));
    p.status = static_cast<GetStatus>(s);
    read_array(r, p.mac);
    p.files = r.u64();
    p.bytes = r.u64();
    p.message = checked_message(r, "GET_REPLY");
    r.expect_end();
    return p;
}

uint32_t decode_get_first_header(Span header, uint8_t* type) {
    const uint8_t t = header.empty() ? 0 : header[0];
    // anything else: refused as "expected a GET_REQUEST"
    *type = t == kGetAttach || t == kPushRequest ? t : kGetRequest;
    return decode_get_frame_header(header, *type);
}

void encode_get_attach(Bytes& out, const std::array<unsigned char, kNonceBytes>& request_nonce) {
    size_t at = begin_frame(out, static_cast<FrameType>(kGetAttach));
    ByteWriter w(out);
    w.bytes(request_nonce.data(), request_nonce.size());
    end_frame(out, at);
}

std::array<unsigned char, kNonceBytes> decode_get_attach(Span in) {
    ByteReader r(in, "GET_ATTACH");
    std::array<unsigned char, kNonceBytes> nonce{};
    read_array(r, nonce);
    r.expect_end();
    return nonce;
}

void encode_get_done(Bytes& out, const GetDone& d) {
    size_t at = begin_frame(out, static_cast<FrameType>(kGetDone));
    ByteWriter w(out);
    w.u32(d.status);
    put_message(w, d.message);
    end_frame(out, at);
}

GetDone decode_get_done(Span in) {
    ByteReader r(in, "GET_DONE");
    GetDone d;
    d.status = r.u32();
    d.message = checked_message(r, "GET_DONE");
    r.expect_end();
    return d;
}

} // namespace sluice::wire
