#include "core/wire/codec.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/wire/byte_io.hpp"

namespace sluice::wire {

namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::protocol, what); }

void check_magic(ByteReader& r, const char* what) {
    auto m = r.bytes(kMagic.size());
    if (!std::equal(m.begin(), m.end(), kMagic.begin()))
        bad(std::string(what) + ": bad magic (not a sluice peer)");
}

void put_magic(ByteWriter& w) { w.bytes(kMagic.data(), kMagic.size()); }

template <size_t N> void read_array(ByteReader& r, std::array<unsigned char, N>& a) {
    auto s = r.bytes(N);
    std::copy(s.begin(), s.end(), a.begin());
}

// Writes a frame header whose length is patched once the payload is written.
size_t begin_frame(Bytes& out, FrameType t) {
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(t));
    w.u8(0);
    w.u16(0);
    size_t at = out.size();
    w.u32(0);
    return at;
}

void end_frame(Bytes& out, size_t length_at) {
    ByteWriter w(out);
    w.patch_u32(length_at, static_cast<uint32_t>(out.size() - (length_at + 4)));
}

std::string checked_message(ByteReader& r, const char* what) {
    uint32_t n = r.u32();
    if (n > kMaxMessageBytes) bad(std::string(what) + ": message of " + std::to_string(n) + " bytes exceeds the limit");
    return r.string(n);
}

} // namespace

const char* frame_type_name(uint8_t type) {
    switch (static_cast<FrameType>(type)) {
    case FrameType::manifest: return "MANIFEST";
    case FrameType::manifest_ack: return "MANIFEST_ACK";
    case FrameType::manifest_end: return "MANIFEST_END";
    case FrameType::block: return "BLOCK";
    case FrameType::stream_end: return "STREAM_END";
    case FrameType::resend: return "RESEND";
    case FrameType::all_verified: return "ALL_VERIFIED";
    case FrameType::transfer_end: return "TRANSFER_END";
    case FrameType::final_status: return "FINAL_STATUS";
    case FrameType::abort: return "ABORT";
    }
    return "unknown";
}

const char* auth_status_text(AuthStatus s) {
    switch (s) {
    case AuthStatus::ok: return "ok";
    case AuthStatus::bad_token: return "authentication failed (wrong token)";
    case AuthStatus::bad_version: return "protocol version not supported";
    case AuthStatus::other_transfer: return "the receiver is serving another transfer";
    case AuthStatus::bad_stream: return "stream index or count refused";
    }
    return "unknown status";
}

void encode_server_hello(Bytes& out, const ServerHello& h) {
    ByteWriter w(out);
    put_magic(w);
    w.u16(h.version);
    w.u16(0);
    w.u32(0);
    w.bytes(h.nonce.data(), h.nonce.size());
}

ServerHello decode_server_hello(Span in) {
    ByteReader r(in, "server hello");
    check_magic(r, "server hello");
    ServerHello h;
    h.version = r.u16();
    r.u16();
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
    w.u8(0);
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
    r.u8();
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
    if (s > 4) bad("server auth: unknown status " + std::to_string(s));
    a.status = static_cast<AuthStatus>(s);
    r.bytes(7);
    read_array(r, a.mac);
    r.expect_end();
    return a;
}

FrameHeader decode_frame_header(Span in) {
    ByteReader r(in, "frame header");
    FrameHeader h;
    h.type = r.u8();
    h.flags = r.u8();
    uint16_t reserved = r.u16();
    h.length = r.u32();
    if (reserved != 0 || h.flags != 0) bad("frame header: reserved bits set in a " + std::string(frame_type_name(h.type)) + " frame");
    uint64_t limit = 0;
    switch (static_cast<FrameType>(h.type)) {
    case FrameType::block: limit = kBlockPrefixBytes + uint64_t{kMaxBlockData}; break;
    case FrameType::manifest:
    case FrameType::manifest_ack:
    case FrameType::manifest_end:
    case FrameType::stream_end:
    case FrameType::resend:
    case FrameType::all_verified:
    case FrameType::transfer_end:
    case FrameType::final_status:
    case FrameType::abort: limit = kMaxControlPayload; break;
    default: bad("frame header: unknown frame type 0x" + [&] {
                 char b[8];
                 std::snprintf(b, sizeof b, "%02x", h.type);
                 return std::string(b);
             }());
    }
    if (h.length > limit)
        bad(std::string(frame_type_name(h.type)) + " frame of " + std::to_string(h.length) + " bytes exceeds the limit of " +
            std::to_string(limit));
    if (static_cast<FrameType>(h.type) == FrameType::block && h.length < kBlockPrefixBytes)
        bad("BLOCK frame shorter than its prefix");
    return h;
}

void encode_frame_header(unsigned char out[kFrameHeaderBytes], FrameType type, uint32_t length) {
    out[0] = static_cast<unsigned char>(type);
    out[1] = out[2] = out[3] = 0;
    for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<unsigned char>(length >> (8 * i));
}

void validate_relative_path(const std::string& path) {
    auto fail = [&](const char* why) { bad("path '" + path + "' refused: " + why); };
    if (path.empty()) fail("empty");
    if (path.size() > kMaxPathBytes) fail("longer than 4095 bytes");
    if (path.find('\0') != std::string::npos) fail("contains a NUL byte");
    if (path.front() == '/') fail("absolute");
    size_t start = 0;
    while (start <= path.size()) {
        size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        std::string_view comp(path.data() + start, end - start);
        if (comp.empty()) fail("has an empty component");
        if (comp == ".") fail("has a '.' component");
        if (comp == "..") fail("has a '..' component");
        if (comp.size() > kMaxNameBytes) fail("has a component longer than 255 bytes");
        start = end + 1;
    }
}

void encode_manifest(Bytes& out, const ManifestChunk& c) {
    size_t at = begin_frame(out, FrameType::manifest);
    ByteWriter w(out);
    w.u32(c.seq);
    w.u32(static_cast<uint32_t>(c.entries.size()));
    for (const auto& e : c.entries) {
        w.u64(e.file_id);
        w.u64(e.size);
        w.i64(e.mtime_ns);
        w.u32(e.mode);
        w.u8(static_cast<uint8_t>(e.kind));
        w.u8(0);
        w.u16(static_cast<uint16_t>(e.path.size()));
        w.u16(static_cast<uint16_t>(e.link_target.size()));
        w.u16(0);
        w.bytes(e.path);
        w.bytes(e.link_target);
    }
    end_frame(out, at);
}

ManifestChunk decode_manifest(Span payload) {
    ByteReader r(payload, "MANIFEST");
    ManifestChunk c;
    c.seq = r.u32();
    uint32_t count = r.u32();
    if (count > kMaxEntriesPerChunk) bad("MANIFEST: " + std::to_string(count) + " entries exceed the limit per chunk");
    if (count > r.remaining() / 36) bad("MANIFEST: entry count " + std::to_string(count) + " larger than the frame");
    c.entries.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
        ManifestEntry e;
        e.file_id = r.u64();
        e.size = r.u64();
        e.mtime_ns = r.i64();
        e.mode = r.u32();
        uint8_t kind = r.u8();
        r.u8();
        uint16_t path_len = r.u16();
        uint16_t target_len = r.u16();
        r.u16();
        if (kind < 1 || kind > 4) bad("MANIFEST: entry " + std::to_string(e.file_id) + " has unknown kind " + std::to_string(kind));
        e.kind = static_cast<EntryKind>(kind);
        if (path_len > kMaxPathBytes) bad("MANIFEST: entry " + std::to_string(e.file_id) + " path too long");
        if (target_len > kMaxLinkTargetBytes) bad("MANIFEST: entry " + std::to_string(e.file_id) + " link target too long");
        e.path = r.string(path_len);
        e.link_target = r.string(target_len);
        validate_relative_path(e.path);
        if (e.mode & ~07777u) bad("MANIFEST: '" + e.path + "' has mode bits outside 07777");
        if (e.kind != EntryKind::file && e.size != 0) bad("MANIFEST: '" + e.path + "' is not a file but has a size");
        if (e.kind == EntryKind::stream && count != 1) bad("MANIFEST: stream '" + e.path + "' must be the only entry of its chunk");
        if (e.size > kMaxFileSize) bad("MANIFEST: '" + e.path + "' size " + std::to_string(e.size) + " exceeds 1 PiB");
        if (e.kind == EntryKind::symlink) {
            if (e.link_target.empty() || e.link_target.find('\0') != std::string::npos)
                bad("MANIFEST: symlink '" + e.path + "' has an empty or NUL-bearing target");
        } else if (!e.link_target.empty()) {
            bad("MANIFEST: '" + e.path + "' is not a symlink but has a link target");
        }
        c.entries.push_back(std::move(e));
    }
    r.expect_end();
    return c;
}

void encode_manifest_ack(Bytes& out, const ManifestAck& a) {
    size_t at = begin_frame(out, FrameType::manifest_ack);
    ByteWriter w(out);
    w.u32(a.seq);
    w.u32(static_cast<uint32_t>(a.verified.size()));
    for (const auto& v : a.verified) {
        w.u64(v.file_id);
        w.u64(v.offset);
        w.u64(v.length);
    }
    end_frame(out, at);
}

ManifestAck decode_manifest_ack(Span payload) {
    ByteReader r(payload, "MANIFEST_ACK");
    ManifestAck a;
    a.seq = r.u32();
    uint32_t n = r.u32();
    if (n > r.remaining() / 24) bad("MANIFEST_ACK: range count " + std::to_string(n) + " larger than the frame");
    a.verified.resize(n);
    for (auto& v : a.verified) {
        v.file_id = r.u64();
        v.offset = r.u64();
        v.length = r.u64();
    }
    r.expect_end();
    return a;
}

void encode_manifest_end(Bytes& out, const ManifestEnd& e) {
    size_t at = begin_frame(out, FrameType::manifest_end);
    ByteWriter w(out);
    w.u32(e.chunk_count);
    w.u32(0);
    w.u64(e.file_count);
    w.u64(e.total_bytes);
    end_frame(out, at);
}

ManifestEnd decode_manifest_end(Span payload) {
    ByteReader r(payload, "MANIFEST_END");
    ManifestEnd e;
    e.chunk_count = r.u32();
    r.u32();
    e.file_count = r.u64();
    e.total_bytes = r.u64();
    r.expect_end();
    return e;
}

void encode_block_prefix(unsigned char out[kFrameHeaderBytes + kBlockPrefixBytes], const BlockPrefix& p,
                         uint32_t data_length) {
    encode_frame_header(out, FrameType::block, data_length + static_cast<uint32_t>(kBlockPrefixBytes));
    auto put = [&](size_t at, uint64_t v) {
        for (int i = 0; i < 8; ++i) out[at + i] = static_cast<unsigned char>(v >> (8 * i));
    };
    put(8, p.file_id);
    put(16, p.offset);
    put(24, p.checksum);
}

BlockPrefix decode_block_prefix(Span prefix) {
    ByteReader r(prefix, "BLOCK");
    BlockPrefix p;
    p.file_id = r.u64();
    p.offset = r.u64();
    p.checksum = r.u64();
    r.expect_end();
    return p;
}

void encode_stream_end(Bytes& out, const StreamEnd& e) {
    size_t at = begin_frame(out, FrameType::stream_end);
    ByteWriter w(out);
    w.u64(e.blocks);
    w.u64(e.bytes);
    end_frame(out, at);
}

StreamEnd decode_stream_end(Span payload) {
    ByteReader r(payload, "STREAM_END");
    StreamEnd e;
    e.blocks = r.u64();
    e.bytes = r.u64();
    r.expect_end();
    return e;
}

void encode_resend(Bytes& out, const ByteRange& v) {
    size_t at = begin_frame(out, FrameType::resend);
    ByteWriter w(out);
    w.u64(v.file_id);
    w.u64(v.offset);
    w.u64(v.length);
    end_frame(out, at);
}

void encode_all_verified(Bytes& out) {
    size_t at = begin_frame(out, FrameType::all_verified);
    end_frame(out, at);
}

ByteRange decode_resend(Span payload) {
    ByteReader r(payload, "RESEND");
    ByteRange v;
    v.file_id = r.u64();
    v.offset = r.u64();
    v.length = r.u64();
    r.expect_end();
    return v;
}

void encode_transfer_end(Bytes& out, const TransferEnd& e) {
    size_t at = begin_frame(out, FrameType::transfer_end);
    ByteWriter w(out);
    w.u32(e.data_streams);
    w.u32(0);
    w.u64(e.blocks);
    w.u64(e.bytes);
    end_frame(out, at);
}

TransferEnd decode_transfer_end(Span payload) {
    ByteReader r(payload, "TRANSFER_END");
    TransferEnd e;
    e.data_streams = r.u32();
    r.u32();
    e.blocks = r.u64();
    e.bytes = r.u64();
    r.expect_end();
    return e;
}

void encode_final_status(Bytes& out, const FinalStatus& s) {
    size_t at = begin_frame(out, FrameType::final_status);
    ByteWriter w(out);
    w.u32(s.status);
    w.u32(0);
    w.u64(s.files_ok);
    w.u64(s.files_failed);
    w.u64(s.bytes);
    std::string_view m(s.message.data(), std::min<size_t>(s.message.size(), kMaxMessageBytes));
    w.u32(static_cast<uint32_t>(m.size()));
    w.bytes(m);
    end_frame(out, at);
}

FinalStatus decode_final_status(Span payload) {
    ByteReader r(payload, "FINAL_STATUS");
    FinalStatus s;
    s.status = r.u32();
    r.u32();
    s.files_ok = r.u64();
    s.files_failed = r.u64();
    s.bytes = r.u64();
    s.message = checked_message(r, "FINAL_STATUS");
    r.expect_end();
    return s;
}

void encode_abort(Bytes& out, const Abort& a) {
    size_t at = begin_frame(out, FrameType::abort);
    ByteWriter w(out);
    w.u32(a.code);
    std::string_view m(a.message.data(), std::min<size_t>(a.message.size(), kMaxMessageBytes));
    w.u32(static_cast<uint32_t>(m.size()));
    w.bytes(m);
    end_frame(out, at);
}

Abort decode_abort(Span payload) {
    ByteReader r(payload, "ABORT");
    Abort a;
    a.code = r.u32();
    a.message = checked_message(r, "ABORT");
    r.expect_end();
    return a;
}

} // namespace sluice::wire
