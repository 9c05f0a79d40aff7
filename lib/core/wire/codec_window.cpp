// FILES_DONE (issue 19, docs/protocol.md "Announce window").
#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::begin_frame;
using detail::end_frame;

void encode_files_done(Bytes& out, const FilesDone& d) {
    size_t at = begin_frame(out, FrameType::files_done);
    ByteWriter w(out);
    w.u64(d.files);
    w.u64(d.below);
    end_frame(out, at);
}

FilesDone decode_files_done(Span payload) {
    ByteReader r(payload, "FILES_DONE");
    FilesDone d;
    d.files = r.u64();
    d.below = r.u64();
    r.expect_end();
    return d; // checked against what was announced by the sender (AnnounceWindow::done, SourceRecords)
}

} // namespace sluice::wire
