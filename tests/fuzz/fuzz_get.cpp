// Selector 11 of fuzz_entry.cpp: get sessions' frames.
#include "fuzz_get.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/wire/codec_get.hpp"

using namespace sluice;
using namespace sluice::wire;

// Get sessions' frames (selector 11; codec_get.cpp), read as the client and the server read
// them: the 8-byte header checked for the type its first byte names, then that type's decoder
// over exactly the length it declares. Beyond not crashing: a frame that decodes says the same
// after encoding it again (HELLO and REQUEST byte for byte; REPLY and DONE field by field,
// since their messages pass through printable()), and an accepted request's path is a plain
// relative path.
void fuzz_get_frame(Span in) {
    if (in.size() < kFrameHeaderBytes) return;
    const uint32_t length = decode_get_frame_header(in.first(kFrameHeaderBytes), in[0]);
    if (in.size() - kFrameHeaderBytes < length) return; // the reader would wait for the rest
    const Span frame = in.first(kFrameHeaderBytes + length);
    const Span p = frame.subspan(kFrameHeaderBytes);
    sluice::wire::Bytes again;
    switch (in[0]) {
    case kGetHello:
        encode_get_hello(again, decode_get_hello(p));
        break;
    case kGetAttach:
        encode_get_attach(again, decode_get_attach(p));
        break;
    case kGetRequest: {
        const GetRequest q = decode_get_request(p);
        if (q.path.find('\0') != std::string::npos || (!q.path.empty() && (q.path.front() == '/' || q.path.back() == '/')))
            std::abort();
        encode_get_request(again, q);
        break;
    }
    case kGetReply: {
        const GetReply a = decode_get_reply(p);
        encode_get_reply(again, a);
        const GetReply b = decode_get_reply(Span(again).subspan(kFrameHeaderBytes));
        if (a.status != b.status || a.mac != b.mac || a.files != b.files || a.bytes != b.bytes || a.message != b.message)
            std::abort();
        return;
    }
    case kGetDone: {
        const GetDone a = decode_get_done(p);
        encode_get_done(again, a);
        const GetDone b = decode_get_done(Span(again).subspan(kFrameHeaderBytes));
        if (a.status != b.status || a.message != b.message) std::abort();
        return;
    }
    default: return; // refused by the header check above
    }
    if (again.size() != frame.size() || !std::equal(again.begin(), again.end(), frame.begin())) std::abort();
}

