#pragma once
// What the codec's files (codec.cpp, codec_handshake.cpp, codec_manifest.cpp) share; callers
// include codec.hpp, never this.
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec.hpp"
#include "sluice/printable.hpp"

namespace sluice::wire::detail {

[[noreturn]] inline void bad(const std::string& what) { throw Error(ErrorCode::protocol, what); }

// Writes a frame header whose length is patched once the payload is written.
inline size_t begin_frame(Bytes& out, FrameType t) {
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(t));
    w.u8(0);
    w.u16(0);
    size_t at = out.size();
    w.u32(0);
    return at;
}

inline void end_frame(Bytes& out, size_t length_at) {
    ByteWriter w(out);
    w.patch_u32(length_at, static_cast<uint32_t>(out.size() - (length_at + 4)));
}

// A STATUS/ABORT-style message: `len u32, text`, at most kMaxMessageBytes. The peer's own
// words, only ever shown to a person: escaped as they enter.
inline std::string checked_message(ByteReader& r, const char* what) {
    uint32_t n = r.u32();
    if (n > kMaxMessageBytes) bad(std::string(what) + ": message of " + std::to_string(n) + " bytes exceeds the limit");
    return printable(r.string(n));
}

inline void put_message(ByteWriter& w, std::string_view m) {
    m = m.substr(0, std::min<size_t>(m.size(), kMaxMessageBytes));
    w.u32(static_cast<uint32_t>(m.size()));
    w.bytes(m);
}

} // namespace sluice::wire::detail
