// CERTIFICATE_ACCEPTED (issue 18, docs/protocol.md "Certificate mode"): no payload.
#include "core/wire/codec_detail.hpp"

namespace sluice::wire {

using detail::begin_frame;
using detail::end_frame;

void encode_certificate_accepted(Bytes& out) {
    size_t at = begin_frame(out, FrameType::certificate_accepted);
    end_frame(out, at);
}

} // namespace sluice::wire
