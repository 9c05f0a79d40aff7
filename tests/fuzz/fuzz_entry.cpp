#include "fuzz_entry.hpp"

#include <span>

#include "sluice/error.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/data_parser.hpp"

using namespace sluice;
using namespace sluice::wire;

namespace {

struct Sink : DataFrameHandler {
    uint64_t bytes = 0;
    void block_begin(const BlockPrefix&, uint32_t) override {}
    void block_data(std::span<const unsigned char> d) override { bytes += d.size(); }
    void block_end() override {}
    void stream_end(const StreamEnd&) override {}
};

// Control frames as the receiver and sender read them: header, then the typed decoder.
void control_frame(Span in) {
    if (in.size() < kFrameHeaderBytes) return;
    FrameHeader h = decode_frame_header(in.first(kFrameHeaderBytes));
    Span p = in.subspan(kFrameHeaderBytes);
    if (p.size() > h.length) p = p.first(h.length);
    switch (static_cast<FrameType>(h.type)) {
    case FrameType::manifest: decode_manifest(p); break;
    case FrameType::manifest_ack: decode_manifest_ack(p); break;
    case FrameType::manifest_end: decode_manifest_end(p); break;
    case FrameType::stream_end: decode_stream_end(p); break;
    case FrameType::resend: decode_resend(p); break;
    case FrameType::transfer_end: decode_transfer_end(p); break;
    case FrameType::final_status: decode_final_status(p); break;
    case FrameType::abort: decode_abort(p); break;
    case FrameType::block: if (p.size() >= kBlockPrefixBytes) decode_block_prefix(p.first(kBlockPrefixBytes)); break;
    }
}

// A data stream cut into pieces at positions taken from the input itself.
void data_stream(Span in) {
    if (in.empty()) return;
    size_t piece = 1 + in[0] % 97;
    in = in.subspan(1);
    DataFrameParser parser;
    Sink sink;
    for (size_t i = 0; i < in.size(); i += piece) parser.feed(in.subspan(i, std::min(piece, in.size() - i)), sink);
}

} // namespace

void fuzz_one(const uint8_t* data, size_t size) {
    if (size == 0) return;
    Span in(data + 1, size - 1);
    try {
        switch (data[0] % 5) {
        case 0: control_frame(in); break;
        case 1: data_stream(in); break;
        case 2: if (in.size() == kClientHelloBytes) decode_client_hello(in); break;
        case 3: if (in.size() == kServerHelloBytes) decode_server_hello(in); break;
        case 4: decode_manifest(in); break;
        }
    } catch (const Error&) {
    }
}
