// Frame headers, BLOCK prefixes and the small control frames (STREAM_END, RESEND,
// ALL_VERIFIED, TRANSFER_END, FINAL_STATUS, ABORT). The handshake is in codec_handshake.cpp,
// MANIFEST and its answers in codec_manifest.cpp.
#include "core/wire/codec.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec_detail.hpp"
#include "sluice/printable.hpp"

namespace sluice::wire {

using detail::bad;
using detail::begin_frame;
using detail::end_frame;

using detail::checked_message;

const char* frame_type_name(uint8_t type) {
    switch (static_cast<FrameType>(type)) {
    case FrameType::manifest: return "MANIFEST";
    case FrameType::manifest_ack: return "MANIFEST_ACK";
    case FrameType::manifest_end: return "MANIFEST_END";
    case FrameType::tree_options: return "TREE_OPTIONS";
    case FrameType::owner_names: return "OWNER_NAMES";
    case FrameType::block: return "BLOCK";
    case FrameType::stream_end: return "STREAM_END";
    case FrameType::resend: return "RESEND";
    case FrameType::all_verified: return "ALL_VERIFIED";
    case FrameType::working: return "WORKING";
    case FrameType::transfer_end: return "TRANSFER_END";
    case FrameType::final_status: return "FINAL_STATUS";
    case FrameType::abort: return "ABORT";
    case FrameType::stream_resume: return "STREAM_RESUME";
    case FrameType::update_params: return "UPDATE_PARAMS";
    case FrameType::reuse: return "REUSE";
    case FrameType::block_sums: return "BLOCK_SUMS";
    case FrameType::files_done: return "FILES_DONE";
    case FrameType::dry_run_items: return "DRY_RUN_ITEMS";
    case FrameType::dry_run_deleted: return "DRY_RUN_DELETED";
    case FrameType::certificate_accepted: return "CERTIFICATE_ACCEPTED";
    }
    return "unknown";
}

FrameHeader decode_frame_header(Span in) {
    ByteReader r(in, "frame header");
    FrameHeader h;
    h.type = r.u8();
    h.flags = r.u8();
    uint16_t reserved = r.u16();
    h.length = r.u32();
    if (reserved != 0 || h.flags != 0)
        bad("frame header: reserved bits set in a " + std::string(frame_type_name(h.type)) + " frame");
    uint64_t limit = 0;
    switch (static_cast<FrameType>(h.type)) {
    case FrameType::block: limit = kBlockPrefixBytes + uint64_t{kMaxBlockData}; break;
    case FrameType::manifest:
    case FrameType::manifest_ack:
    case FrameType::manifest_end:
    case FrameType::tree_options:
    case FrameType::owner_names:
    case FrameType::stream_end:
    case FrameType::resend:
    case FrameType::all_verified:
    case FrameType::transfer_end:
    case FrameType::final_status:
    case FrameType::update_params:
    case FrameType::reuse:
    case FrameType::block_sums:
    case FrameType::dry_run_items:
    case FrameType::dry_run_deleted:
    case FrameType::abort: limit = kMaxControlPayload; break;
    case FrameType::stream_resume: limit = kStreamResumeBytes; break;
    case FrameType::files_done: limit = kFilesDoneBytes; break;
    case FrameType::working: limit = 0; break; // no payload
    case FrameType::certificate_accepted: limit = 0; break;
    default:
        bad("frame header: unknown frame type 0x" + [&] {
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

void encode_block_prefix(unsigned char out[kFrameHeaderBytes + kBlockPrefixBytes], const BlockPrefix& p, uint32_t data_length) {
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

void encode_working(Bytes& out) {
    size_t at = begin_frame(out, FrameType::working);
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
