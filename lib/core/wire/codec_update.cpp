// Changed-block updates (docs/protocol.md, "Updates by changed blocks"): UPDATE_PARAMS,
// BLOCK_SUMS and REUSE. What decoding can check alone is checked here (counts against the
// frame, order, empty ranges); what needs the file (its size, the block size) is checked by
// the side that holds it (send/plan/update_plan.cpp, recv/session/update_side.cpp).
#include <string>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::bad;
using detail::begin_frame;
using detail::end_frame;

void encode_update_params(Bytes& out, const UpdateParams& p) {
    size_t at = begin_frame(out, FrameType::update_params);
    ByteWriter w(out);
    w.u64(p.block_size);
    w.u32(p.checksum ? 1 : 0);
    w.u32(0);
    end_frame(out, at);
}

UpdateParams decode_update_params(Span payload) {
    ByteReader r(payload, "UPDATE_PARAMS");
    UpdateParams p;
    p.block_size = r.u64();
    uint32_t flags = r.u32();
    r.u32();
    r.expect_end();
    if (flags & ~1u) bad("UPDATE_PARAMS: unknown flags " + std::to_string(flags));
    if (p.block_size < 64 * 1024 || p.block_size > kMaxBlockData || p.block_size % 4096)
        bad("UPDATE_PARAMS: block size " + std::to_string(p.block_size) + " is not a multiple of 4 KiB from 64 KiB to 64 MiB");
    p.checksum = flags & 1;
    return p;
}

void encode_block_sums(Bytes& out, const BlockSums& s) {
    size_t at = begin_frame(out, FrameType::block_sums);
    ByteWriter w(out);
    w.u64(s.file_id);
    w.u64(s.old_size);
    w.u32(static_cast<uint32_t>(s.sums.size()));
    w.u32(0);
    for (uint64_t v : s.sums) w.u64(v);
    end_frame(out, at);
}

BlockSums decode_block_sums(Span payload) {
    ByteReader r(payload, "BLOCK_SUMS");
    BlockSums s;
    s.file_id = r.u64();
    s.old_size = r.u64();
    uint32_t n = r.u32();
    r.u32();
    if (n != r.remaining() / 8 || r.remaining() % 8)
        bad("BLOCK_SUMS: " + std::to_string(n) + " checksums announced, the frame holds " + std::to_string(r.remaining() / 8));
    if (s.old_size > kMaxFileSize) bad("BLOCK_SUMS: old size " + std::to_string(s.old_size) + " exceeds 1 PiB");
    s.sums.resize(n);
    for (auto& v : s.sums) v = r.u64();
    r.expect_end();
    return s;
}

void encode_reuse(Bytes& out, const Reuse& x) {
    size_t at = begin_frame(out, FrameType::reuse);
    ByteWriter w(out);
    w.u64(x.file_id);
    w.u32(static_cast<uint32_t>(x.ranges.size()));
    w.u32(0);
    for (const Extent& e : x.ranges) {
        w.u64(e.offset);
        w.u64(e.length);
    }
    end_frame(out, at);
}

Reuse decode_reuse(Span payload) {
    ByteReader r(payload, "REUSE");
    Reuse x;
    x.file_id = r.u64();
    uint32_t n = r.u32();
    r.u32();
    if (n == 0 || n != r.remaining() / 16 || r.remaining() % 16)
        bad("REUSE: " + std::to_string(n) + " ranges announced, the frame holds " + std::to_string(r.remaining() / 16));
    x.ranges.resize(n);
    uint64_t end = 0;
    for (auto& e : x.ranges) {
        e.offset = r.u64();
        e.length = r.u64();
        if (e.length == 0 || e.offset < end || e.offset > kMaxFileSize || e.length > kMaxFileSize - e.offset)
            bad("REUSE: range [" + std::to_string(e.offset) + ", +" + std::to_string(e.length) +
                ") of file id " + std::to_string(x.file_id) + " is empty, out of order or overlaps the one before");
        end = e.offset + e.length;
    }
    r.expect_end();
    return x;
}

} // namespace sluice::wire
