#pragma once
// Blocking frame reads and writes for the control connection (low volume; data streams
// parse frames out of their own buffers).
#include <vector>

#include "core/io/socket.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

struct Frame {
    wire::FrameHeader header;
    std::vector<unsigned char> payload;
    wire::FrameType type() const { return static_cast<wire::FrameType>(header.type); }
};

// Reads one whole frame; lengths are bounded by decode_frame_header before allocating.
inline Frame read_frame(int fd, const char* what) {
    unsigned char h[wire::kFrameHeaderBytes];
    recv_exact(fd, h, what);
    Frame f;
    f.header = wire::decode_frame_header(h);
    f.payload.resize(f.header.length);
    recv_exact(fd, f.payload, what);
    return f;
}

inline void write_frame(int fd, const std::vector<unsigned char>& encoded, const char* what) { send_all(fd, encoded, what); }

} // namespace sluice
