#include "fuzz_entry.hpp"
#include "fuzz_chunked.hpp"
#include "fuzz_get.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "sluice/error.hpp"
#include "sluice/printable.hpp"
#include "sluice/url.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/data_parser.hpp"
#include "recv/paths/direct_layout.hpp"
#include "recv/store/journal.hpp"
#include "serve/http/request.hpp"
#include "serve/http/response.hpp"
#include "serve/http/target.hpp"

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
    case FrameType::stream_resume: decode_stream_resume(p); break;
    case FrameType::owner_names: decode_owner_names(p); break;
    case FrameType::all_verified: // no payload: nothing to decode
    case FrameType::working: break;
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

// Takes bytes from the front of the input; zeros once it is used up.
struct Bytes {
    Span in;
    unsigned take() {
        if (in.empty()) return 0;
        unsigned b = in[0];
        in = in.subspan(1);
        return b;
    }
    unsigned take16() { return take() | take() << 8; }
};

unsigned char expected_byte(uint64_t i) { return static_cast<unsigned char>(i * 131 + (i >> 12) * 7 + 1); }

[[noreturn]] void placement_bug(const char* what) {
    std::fprintf(stderr, "placement: %s\n", what);
    std::abort();
}

// The direct receive path's block placement (direct_layout): a file cut into non-overlapping
// blocks at fuzzer-chosen edges, the blocks' chunks written in a fuzzer-chosen interleaving
// of up to four "streams", each chunk exactly as DirectReceiver writes it (data at buffer +
// skew, head and tail with a plain write, the whole pages from the buffer with the padding
// zeroed). Aborts if a direct write breaks O_DIRECT's alignment, pads anywhere but past the
// end of the file, or if the file read back differs from what was sent by a single byte.
// Input: size (3 bytes), buffer pages (1), then block lengths (2 bytes each; top bit: whole
// pages), then the interleaving.
void placement(Span input) {
    using namespace sluice::direct_layout;
    static int fd = ::memfd_create("sluice-fuzz-placement", MFD_CLOEXEC);
    if (fd < 0) placement_bug("no memfd");
    Bytes in{input};
    const uint64_t size = 1 + (in.take() | in.take() << 8 | in.take() << 16) % (3u << 16);
    const size_t capacity = (1 + in.take() % 16) * kAlign;
    std::vector<std::pair<uint64_t, uint64_t>> blocks; // [offset, end)
    for (uint64_t off = 0; off < size;) {
        unsigned v = in.in.empty() ? 0x7fff : in.take16();
        uint64_t len = v & 0x8000 ? (1 + v % 8) * kAlign : 1 + v % 20000;
        len = std::min(len, size - off);
        blocks.push_back({off, off + len});
        off += len;
    }
    for (size_t i = blocks.size(); i > 1; --i) std::swap(blocks[i - 1], blocks[in.take() % i]); // send order
    const size_t streams = 1 + in.take() % 4;
    // Each stream takes the next unsent block when it is done with its own.
    std::vector<std::pair<uint64_t, uint64_t>> at(streams, {0, 0}); // the stream's [next chunk, block end)
    size_t next_block = 0;
    if (::ftruncate(fd, 0) != 0) placement_bug("ftruncate");
    std::vector<unsigned char> mem(capacity + 2 * kAlign);
    unsigned char* buf = mem.data() + (kAlign - reinterpret_cast<uintptr_t>(mem.data()) % kAlign) % kAlign;
    for (size_t step = 0; step < 1'000'000; ++step) {
        size_t s = in.take() % streams;
        for (size_t k = 0; k < streams && at[s].first == at[s].second; ++k) {
            if (next_block < blocks.size()) {
                at[s] = blocks[next_block++];
                break;
            }
            s = (s + 1) % streams;
        }
        if (at[s].first == at[s].second) break; // every block written
        const Chunk c = next_chunk(at[s].first, at[s].second, capacity);
        if (c.offset != at[s].first || c.length == 0 || c.skew + c.length > capacity) placement_bug("chunk");
        at[s].first += c.length;
        // What the buffer held before, as far as a write could reach: never to reach the file.
        std::memset(buf, 0xEE, std::min<size_t>(capacity, (c.skew + c.length + kAlign - 1) / kAlign * kAlign));
        for (size_t i = 0; i < c.length; ++i) buf[c.skew + i] = expected_byte(c.offset + i);
        const Plan p = plan_chunk(c, size);
        if (p.head.offset != c.offset || p.direct.offset != p.head.offset + p.head.length ||
            p.tail.offset != p.direct.offset + p.direct.length || p.tail.offset + p.tail.length != c.offset + c.length)
            placement_bug("runs do not cover the chunk in order");
        for (const Run* r : {&p.head, &p.direct, &p.tail})
            if (r->at != c.skew + (r->offset - c.offset)) placement_bug("run taken from the wrong place in the buffer");
        if (p.head.length >= kAlign || p.tail.length >= kAlign) placement_bug("a buffered run longer than a page");
        if (p.direct.length) {
            if (p.direct.offset % kAlign || p.direct.at % kAlign || p.direct_padded % kAlign ||
                p.direct_padded < p.direct.length || p.direct_padded - p.direct.length >= kAlign ||
                p.direct.at + p.direct_padded > capacity)
                placement_bug("direct write not aligned");
            if (p.direct_padded != p.direct.length && p.direct.offset + p.direct.length != size)
                placement_bug("padding written before the end of the file");
            std::memset(buf + p.direct.at + p.direct.length, 0, p.direct_padded - p.direct.length);
        }
        auto write = [&](const unsigned char* from, size_t n, uint64_t off) {
            if (n && ::pwrite(fd, from, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) placement_bug("pwrite");
        };
        write(buf + p.head.at, p.head.length, p.head.offset);
        write(buf + p.tail.at, p.tail.length, p.tail.offset);
        write(buf + p.direct.at, p.direct_padded, p.direct.offset);
    }
    // finish_file truncates the padding of the last page.
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) placement_bug("ftruncate");
    std::vector<unsigned char> got(size + 1);
    if (::pread(fd, got.data(), size + 1, 0) != static_cast<ssize_t>(size)) placement_bug("file has the wrong size");
    for (uint64_t i = 0; i < size; ++i)
        if (got[i] != expected_byte(i)) placement_bug("the file differs from what was sent");
}

// printable() stands between peer text and a terminal: whatever comes in, what comes out has
// no C0 control, no DEL, no C1 control in its UTF-8 form, is valid UTF-8, and is a fixed point.
void terminal_text(Span in) {
    const std::string_view raw(reinterpret_cast<const char*>(in.data()), in.size());
    const std::string out = printable(raw);
    for (size_t i = 0; i < out.size(); ++i) {
        const auto c = static_cast<unsigned char>(out[i]);
        if (c < 0x20 || c == 0x7f) std::abort();
        if (c == 0xc2 && i + 1 < out.size() && static_cast<unsigned char>(out[i + 1]) < 0xa0) std::abort(); // U+0080-U+009F
    }
    if (printable(out) != out) std::abort();
}

// A URL from the command line or a script: parse_url either refuses it or returns a host
// and token that are parts of it: a URL with a raw '#' (a fragment) is refused, and no '#',
// '@', '/' or '?' is carried into the host. The token is percent-decoded, so a '#' written
// %23 is the token's own (docs: "a '#' in a token is written %23").
void url(Span in) {
    const std::string text(reinterpret_cast<const char*>(in.data()), in.size());
    const Endpoint e = parse_url(text);
    if (e.host.empty() || e.port == 0) std::abort();
    if (text.find('#') != std::string::npos) std::abort();
    if (e.host.find_first_of("@#/?") != std::string::npos) std::abort();
}

// The resume journal is read back from the receive directory after a crash, so its bytes are
// whatever a torn write left there: load() must return or refuse, never crash, and every
// range it returns must lie inside the file it describes.
void journal_file(Span in) {
    static const int dir = [] {
        static char tmpl[] = "/tmp/sluice-fuzz-journal.XXXXXX";
        static char* made = ::mkdtemp(tmpl);
        if (!made) return -1;
        std::atexit([] { // leave nothing behind in /tmp
            const std::string d = made;
            ::unlink((d + "/.sluice-part.fuzz").c_str());
            ::unlink((d + "/.sluice-part.fuzz.j").c_str());
            ::rmdir(d.c_str());
        });
        return ::open(made, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    }();
    if (dir < 0 || in.size() < 8) return;
    const uint64_t size = in[0] | (uint64_t{in[1]} << 8) | (uint64_t{in[2]} << 16) | (uint64_t{in[3]} << 24);
    const int64_t mtime = static_cast<int8_t>(in[4]);
    in = in.subspan(8);
    const std::string temp = ".sluice-part.fuzz";
    // The partial file the journal describes, as long as its declared size (sparse).
    const int data_fd = ::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (data_fd < 0) return;
    const bool sized = ::ftruncate(data_fd, static_cast<off_t>(size)) == 0;
    ::close(data_fd);
    if (!sized) return;
    const int fd = ::openat(dir, journal::name_for(temp).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    const bool written = ::write(fd, in.data(), in.size()) == static_cast<ssize_t>(in.size());
    ::close(fd);
    if (!written) return;
    const journal::Contents c = journal::load(dir, temp, size, mtime);
    for (const auto& [begin, end] : c.ranges)
        if (begin >= end || end > size) std::abort();
}

// sluice serve's HTTP decoders (selector 10): a request head, its target, a Range value and
// the percent coding of listing links. Beyond not crashing: every view of a parsed head lies
// inside the head; a refused head names a status a client understands; an accepted target is
// a plain relative path (no '.', '..' or empty segment, no leading or trailing '/', no NUL),
// which is what keeps DIR's confinement from depending on the file system alone; a range lies
// inside the file; encoding a name for a link and decoding it gives the name back; and read as
// a chunked body, cut anywhere, it decodes the same (fuzz_chunked.cpp).
void http_request(Span in) {
    const std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
    http::Request req;
    const http::ParseOutcome o = http::parse_request(text, req);
    std::string_view target = text;
    if (o.result == http::ParseResult::complete) {
        if (req.head_bytes == 0 || req.head_bytes > text.size() || req.head_bytes > http::kMaxHeadBytes) std::abort();
        const char* lo = text.data();
        const char* hi = text.data() + req.head_bytes;
        for (std::string_view v : {req.method_text, req.target, req.range, req.if_range, req.if_none_match,
                                   req.if_modified_since, req.authorization, req.accept})
            if (!v.empty() && (v.data() < lo || v.data() + v.size() > hi)) std::abort();
        target = req.target;
    } else if (o.result == http::ParseResult::error) {
        switch (o.status) {
        case 400: case 413: case 414: case 431: case 501: case 505: break;
        default: std::abort();
        }
    }
    http::Target t;
    if (http::parse_target(target, t) == 0) {
        const std::string& r = t.rel;
        if (!r.empty() && (r.front() == '/' || r.back() == '/')) std::abort();
        if (r.find('\0') != std::string::npos) std::abort();
        size_t at = 0;
        while (!r.empty() && at <= r.size()) {
            const size_t end = std::min(r.find('/', at), r.size());
            const std::string_view seg(r.data() + at, end - at);
            if (seg.empty() || seg == "." || seg == "..") std::abort();
            at = end + 1;
        }
    }
    const uint64_t size = in.size() * 977ULL;
    http::ByteRange range;
    if (http::parse_range(text, size, range) == http::RangeResult::ok && (range.first > range.last || range.last >= size))
        std::abort();
    if (text.find('\0') == std::string_view::npos) {
        std::string back;
        if (!http::percent_decode(http::percent_encode_path(text), back, false) || back != text) std::abort();
    }
    fuzz_chunked_body(text);
}

} // namespace

void fuzz_one(const uint8_t* data, size_t size) {
    if (size == 0) return;
    Span in(data + 1, size - 1);
    try {
        switch (data[0] % 12) {
        case 0: control_frame(in); break;
        case 1: data_stream(in); break;
        case 2:
            if (in.size() == kClientHelloBytes) decode_client_hello(in);
            break;
        case 3:
            if (in.size() == kServerHelloBytes) decode_server_hello(in);
            break;
        case 4: decode_manifest(in); break;
        case 5: placement(in); break;
        case 6:
            if (in.size() == kServerAuthBytes) decode_server_auth(in);
            break;
        case 7: terminal_text(in); break;
        case 8: url(in); break;
        case 9: journal_file(in); break;
        case 10: http_request(in); break;
        case 11: fuzz_get_frame(in); break;
        }
    } catch (const Error&) {}
}
