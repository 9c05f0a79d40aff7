#pragma once
// What the codec's files (codec.cpp, codec_handshake.cpp, codec_manifest.cpp) share; callers
// include codec.hpp, never this.
#include <cstddef>
#include <string>

#include "core/wire/byte_io.hpp"
#include "core/wire/codec.hpp"

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

} // namespace sluice::wire::detail
