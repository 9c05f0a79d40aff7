#pragma once
// The chunked transfer coding of a request body (RFC 9112 7.1), decoded as it arrives in
// pieces of any size, without I/O and without allocation. Network input is hostile: a chunk
// size is at most 16 hex digits (no overflow), extensions are skipped but bounded per line,
// trailers are read and dropped but bounded in bytes and count, and the framing as a whole may
// not outgrow the data it carries by more than a fixed slack (a flood of empty extensions or
// one-byte chunks is refused, not read for as long as the client likes). Line ends are CR LF
// exactly: a bare LF or CR in the framing is where parsers disagree (request smuggling), so
// it is refused.
#include <cstddef>
#include <cstdint>

namespace sluice::http {

inline constexpr unsigned kMaxChunkSizeDigits = 16;  // leading zeros included: 2^64 - 1 at most
inline constexpr size_t kMaxChunkExtBytes = 1024;     // one chunk line's extensions
inline constexpr size_t kMaxTrailerBytes = 8192;      // the trailer section (as a head: kMaxHeadBytes)
inline constexpr unsigned kMaxTrailers = 64;
inline constexpr uint64_t kMaxFramingSlack = 64 << 10; // framing bytes beyond the data bytes

class ChunkedDecoder {
public:
    // One call's outcome: `used` bytes of the input were consumed; among them, when data_len
    // is not zero, body bytes at input + data_off. error: 0, or 400 (malformed framing, a
    // bound exceeded). done: the last chunk and the trailers are in; bytes after `used` are
    // the next request's.
    struct Step {
        size_t used = 0;
        size_t data_off = 0, data_len = 0;
        int error = 0;
        bool done = false;
    };

    // Consumes framing up to the next data (returned), the end of the input, the end of the
    // body or an error. Call again with the rest until used == the input's size, done or error.
    Step feed(const char* in, size_t len);

    // The body's bytes so far plus what the current chunk's size line still promises: the
    // caller refuses a body growing past its limit as soon as a size line says so, before
    // that chunk's data is sent.
    uint64_t promised() const { return data_total_ + left_; }
    uint64_t data_bytes() const { return data_total_; }
    bool done() const { return state_ == State::done; }

private:
    enum class State : uint8_t {
        size,       // hex digits of a chunk size
        size_ws,    // blanks after the size: only an extension may follow
        ext,        // ";name=value..." skipped to the CR
        size_lf,    // the LF after the size line's CR
        data,       // chunk bytes
        data_cr,    // the CR LF after a chunk's data
        data_lf,
        trailer,    // a trailer line (or the blank line ending the body)
        trailer_lf, // the LF after a trailer line's CR
        done,
        failed,
    };
    State state_ = State::size;
    unsigned digits_ = 0;
    uint64_t size_ = 0;       // of the chunk being read
    uint64_t left_ = 0;       // of its data
    uint64_t data_total_ = 0;
    uint64_t framing_ = 0;    // bytes that were not data
    size_t line_ = 0;         // bytes of the current extension or trailer line
    size_t trailer_bytes_ = 0;
    unsigned trailers_ = 0;
    bool line_has_colon_ = false;
};

} // namespace sluice::http
