// The handshake (docs/protocol.md, "Handshake"): the fixed-size hello and auth messages each
// side sends before any frame, and the texts of the auth statuses.
#include "core/wire/codec.hpp"

#include <algorithm>
#include <string>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::bad;

namespace {

void check_magic(ByteReader& r, const char* what) {
    auto m = r.bytes(kMagic.size());
    if (!std::equal(m.begin(), m.end(), kMagic.begin())) bad(std::string(what) + ": bad magic (not a sluice peer)");
}

void put_magic(ByteWriter& w) { w.bytes(kMagic.data(), kMagic.size()); }

template <size_t N> void read_array(ByteReader& r, std::array<unsigned char, N>& a) {
    auto s = r.bytes(N);
    std::copy(s.begin(), s.end(), a.begin());
}

} // namespace

const char* auth_status_text(AuthStatus s) {
    switch (s) {
    case AuthStatus::ok: return "ok";
    case AuthStatus::bad_token: return "authentication failed (wrong token)";
    case AuthStatus::bad_version: return "protocol version not supported";
    case AuthStatus::other_transfer: return "the receiver is serving another transfer";
    case AuthStatus::bad_stream: return "stream index or count refused";
    case AuthStatus::encryption_mismatch: return "one side encrypts and the other does not";
    }
    return "unknown status";
}

void encode_server_hello(Bytes& out, const ServerHello& h) {
    ByteWriter w(out);
    put_magic(w);
    w.u16(h.version);
    w.u16(h.features);
    w.u32(0);
    w.bytes(h.nonce.data(), h.nonce.size());
}

ServerHello decode_server_hello(Span in) {
    ByteReader r(in, "server hello");
    check_magic(r, "server hello");
    ServerHello h;
    h.version = r.u16();
    h.features = r.u16();
    r.u32();
    read_array(r, h.nonce);
    r.expect_end();
    return h;
}

void encode_client_hello(Bytes& out, const ClientHello& h) {
    ByteWriter w(out);
    put_magic(w);
    w.u16(h.version);
    w.u8(static_cast<uint8_t>(h.role));
    w.u8(h.features);
    w.u16(h.stream_index);
    w.u16(h.stream_count);
    w.bytes(h.transfer_id.data(), h.transfer_id.size());
    w.bytes(h.nonce.data(), h.nonce.size());
    w.bytes(h.mac.data(), h.mac.size());
}

Span client_hello_signed_part(Span encoded) { return encoded.first(kClientHelloBytes - kMacBytes); }

ClientHello decode_client_hello(Span in) {
    ByteReader r(in, "client hello");
    check_magic(r, "client hello");
    ClientHello h;
    h.version = r.u16();
    uint8_t role = r.u8();
    if (role > 1) bad("client hello: unknown role " + std::to_string(role));
    h.role = static_cast<Role>(role);
    h.features = r.u8();
    h.stream_index = r.u16();
    h.stream_count = r.u16();
    read_array(r, h.transfer_id);
    read_array(r, h.nonce);
    read_array(r, h.mac);
    r.expect_end();
    if (h.stream_count == 0 || h.stream_count > kMaxStreams)
        bad("client hello: stream count " + std::to_string(h.stream_count) + " outside 1.." + std::to_string(kMaxStreams));
    if (h.role == Role::control && h.stream_index != 0) bad("client hello: control stream with index != 0");
    if (h.role == Role::data && (h.stream_index == 0 || h.stream_index > h.stream_count))
        bad("client hello: data stream index " + std::to_string(h.stream_index) + " outside 1.." +
            std::to_string(h.stream_count));
    return h;
}

void encode_server_auth(Bytes& out, const ServerAuth& a) {
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(a.status));
    for (int i = 0; i < 7; ++i) w.u8(0);
    w.bytes(a.mac.data(), a.mac.size());
}

ServerAuth decode_server_auth(Span in) {
    ByteReader r(in, "server auth");
    ServerAuth a;
    uint8_t s = r.u8();
    if (s > 4 && s != static_cast<uint8_t>(AuthStatus::encryption_mismatch))
        bad("server auth: unknown status " + std::to_string(s));
    a.status = static_cast<AuthStatus>(s);
    r.bytes(7);
    read_array(r, a.mac);
    r.expect_end();
    return a;
}

} // namespace sluice::wire
