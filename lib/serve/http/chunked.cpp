#include "serve/http/chunked.hpp"

#include <algorithm>

#include "serve/http/request.hpp"

namespace sluice::http {

namespace {

int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// A control byte where text is expected (HTAB is text).
bool is_ctl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

} // namespace

ChunkedDecoder::Step ChunkedDecoder::feed(const char* in, size_t len) {
    Step s;
    size_t i = 0;
    auto fail = [&] {
        state_ = State::failed;
        s.used = i;
        s.error = 400;
        return s;
    };
    if (state_ == State::failed) return fail();
    while (i < len && state_ != State::done) {
        if (state_ == State::data) {
            const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, len - i));
            s.data_off = i;
            s.data_len = n;
            left_ -= n;
            data_total_ += n;
            i += n;
            if (left_ == 0) state_ = State::data_cr;
            s.used = i;
            return s; // one span per call: the caller writes it, then feeds the rest
        }
        const auto c = static_cast<unsigned char>(in[i++]);
        if (++framing_ > data_total_ + kMaxFramingSlack) return fail();
        switch (state_) {
        case State::size: {
            const int v = hex_value(c);
            if (v >= 0) {
                if (++digits_ > kMaxChunkSizeDigits) return fail(); // would overflow, or padding without end
                size_ = size_ << 4 | static_cast<uint64_t>(v);
            } else if (digits_ == 0) {
                return fail(); // a size line must start with a digit
            } else if (c == ';') {
                state_ = State::ext;
                line_ = 0;
            } else if (c == ' ' || c == '\t') {
                state_ = State::size_ws;
            } else if (c == '\r') {
                state_ = State::size_lf;
            } else {
                return fail(); // "1x", "0x10", a bare LF...
            }
            break;
        }
        case State::size_ws: // RFC 9112 7.1.1: BWS only before ";"
            if (c == ';') {
                state_ = State::ext;
                line_ = 0;
            } else if (c != ' ' && c != '\t') {
                return fail();
            }
            break;
        case State::ext:
            if (c == '\r') {
                state_ = State::size_lf;
            } else if (is_ctl(c) || ++line_ > kMaxChunkExtBytes) {
                return fail();
            }
            break;
        case State::size_lf:
            if (c != '\n') return fail();
            digits_ = 0;
            if (size_ == 0) {
                state_ = State::trailer;
                line_ = 0;
                line_has_colon_ = false;
            } else {
                left_ = size_;
                state_ = State::data;
            }
            size_ = 0;
            s.used = i;
            return s; // the size is known: the caller checks it against its limit first
        case State::data_cr:
            if (c != '\r') return fail(); // the data did not end where its size said
            state_ = State::data_lf;
            break;
        case State::data_lf:
            if (c != '\n') return fail();
            state_ = State::size;
            break;
        case State::trailer:
            if (++trailer_bytes_ > kMaxTrailerBytes) return fail();
            if (c == '\r') {
                if (line_ > 0 && !line_has_colon_) return fail(); // a trailer line is a field
                state_ = State::trailer_lf;
            } else if (line_ == 0 && (c == ' ' || c == '\t')) {
                return fail(); // obs-fold
            } else if (!line_has_colon_) {
                if (c == ':' && line_ > 0) {
                    line_has_colon_ = true;
                } else if (!is_tchar(c)) {
                    return fail();
                }
                ++line_;
            } else {
                if (is_ctl(c)) return fail();
                ++line_;
            }
            break;
        case State::trailer_lf:
            if (c != '\n') return fail();
            if (++trailer_bytes_ > kMaxTrailerBytes) return fail();
            if (line_ == 0) {
                state_ = State::done; // the blank line: the body is complete
            } else {
                if (++trailers_ > kMaxTrailers) return fail();
                line_ = 0;
                line_has_colon_ = false;
                state_ = State::trailer;
            }
            break;
        case State::data:
        case State::done:
        case State::failed: break; // handled above
        }
    }
    s.used = i;
    s.done = state_ == State::done;
    return s;
}

} // namespace sluice::http
