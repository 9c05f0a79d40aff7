#include "fuzz_entry.hpp"

#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "sluice/error.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/data_parser.hpp"

using namespace sluice;
using namespace sluice::wire;

namespace {

struct CountingHandler : DataFrameHandler {
    uint64_t bytes = 0;
    void block_begin(const BlockPrefix&, uint32_t) override {}
    void block_data(std::span<const unsigned char> d) override { bytes += d.size(); }
    void block_end() override {}
    void stream_end(const StreamCounts&) override {}
};

// How a reading of a data stream ended: the protocol error's text, or where the bytes ran out.
struct Verdict {
    std::string error;
    bool ended = false;
    StreamCounts counts;
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
    case FrameType::all_verified: break; // no payload: nothing to decode
    case FrameType::block:
        if (p.size() >= kBlockPrefixBytes) decode_block_prefix(p.first(kBlockPrefixBytes));
        break;
    }
}

// A data stream cut into pieces at positions taken from the input itself, pushed through
// DataFrameParser as recv_write receives it.
Verdict pushed(Span in, size_t piece) {
    Verdict v;
    DataFrameParser parser;
    CountingHandler counter;
    try {
        for (size_t i = 0; i < in.size(); i += piece) parser.feed(in.subspan(i, std::min(piece, in.size() - i)), counter);
    } catch (const Error& e) {
        v.error = e.what();
    }
    v.ended = parser.ended();
    v.counts = parser.counts();
    return v;
}

// The same stream pulled through DataFrameReader as the direct, splice and pipe paths read
// their sockets: frame by frame, each block's data read by the caller in pieces.
Verdict pulled(Span in, size_t piece) {
    Verdict v;
    DataFrameReader reader;
    size_t pos = 0;
    struct OutOfInput {};
    auto read = [&](unsigned char* p, size_t n) {
        if (in.size() - pos < n) throw OutOfInput{};
        std::memcpy(p, in.data() + pos, n);
        pos += n;
    };
    try {
        while (auto b = reader.next(read)) {
            for (size_t left = b->data_length; left;) {
                size_t n = std::min(left, piece);
                if (in.size() - pos < n) throw OutOfInput{};
                pos += n;
                left -= n;
            }
        }
        if (pos < in.size()) reader.data_after_end(); // what refuse_data_after_end sees queued
    } catch (const Error& e) {
        v.error = e.what();
    } catch (const OutOfInput&) {}
    v.ended = reader.ended();
    v.counts = reader.counts();
    return v;
}

// Both readers apply the one set of rules, so they must agree on every input.
void data_stream(Span in) {
    if (in.empty()) return;
    size_t piece = 1 + in[0] % 97;
    in = in.subspan(1);
    Verdict a = pushed(in, piece), b = pulled(in, piece);
    if (a.error != b.error || a.ended != b.ended || a.counts.blocks != b.counts.blocks || a.counts.bytes != b.counts.bytes)
        std::abort();
    if (!a.error.empty()) throw Error(ErrorCode::protocol, a.error);
}

} // namespace

void fuzz_one(const uint8_t* data, size_t size) {
    if (size == 0) return;
    Span in(data + 1, size - 1);
    try {
        switch (data[0] % 5) {
        case 0: control_frame(in); break;
        case 1: data_stream(in); break;
        case 2:
            if (in.size() == kClientHelloBytes) decode_client_hello(in);
            break;
        case 3:
            if (in.size() == kServerHelloBytes) decode_server_hello(in);
            break;
        case 4: decode_manifest(in); break;
        }
    } catch (const Error&) {}
}
