// STREAM_RESUME (issue 16, docs/protocol.md "Stream reconnect").
#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::bad;
using detail::begin_frame;
using detail::end_frame;

void encode_stream_resume(Bytes& out, const StreamResume& r) {
    size_t at = begin_frame(out, FrameType::stream_resume);
    ByteWriter w(out);
    w.u64(r.blocks);
    w.u64(r.bytes);
    end_frame(out, at);
}

StreamResume decode_stream_resume(Span payload) {
    ByteReader r(payload, "STREAM_RESUME");
    StreamResume s;
    s.blocks = r.u64();
    s.bytes = r.u64();
    r.expect_end();
    if (s.blocks > s.bytes) bad("STREAM_RESUME: " + std::to_string(s.blocks) + " blocks in " + std::to_string(s.bytes) + " bytes");
    return s;
}

} // namespace sluice::wire
