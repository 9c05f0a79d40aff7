#include "fuzz_chunked.hpp"

#include <cstdlib>
#include <string>

#include "serve/http/chunked.hpp"

namespace {

struct Outcome {
    std::string data;
    size_t used = 0;
    int error = 0;
    bool done = false;
};

// Feeds `in` in pieces of `step` bytes, as the network would cut it. Every span and count
// must lie inside what was fed; the body never grows past what its size lines promised.
Outcome decode(std::string_view in, size_t step) {
    sluice::http::ChunkedDecoder d;
    Outcome o;
    size_t fed = 0;
    while (fed < in.size() && !o.done && !o.error) {
        const size_t piece = std::min(step, in.size() - fed);
        size_t off = 0;
        while (off < piece) {
            const auto s = d.feed(in.data() + fed + off, piece - off);
            if (s.used > piece - off) std::abort();
            if (s.data_len && (s.data_off + s.data_len > s.used)) std::abort();
            if (s.error && s.error != 400) std::abort();
            if (s.error && s.done) std::abort();
            if (!s.error && !s.done && s.used == 0) std::abort(); // no progress on non-empty input
            o.data.append(in.data() + fed + off + s.data_off, s.data_len);
            off += s.used;
            if (d.data_bytes() != o.data.size() || d.promised() < d.data_bytes()) std::abort();
            if (s.error || s.done) {
                o.error = s.error;
                o.done = s.done;
                break;
            }
        }
        fed += off;
    }
    o.used = fed;
    return o;
}

} // namespace

void fuzz_chunked_body(std::string_view in) {
    // The same bytes, whole and cut at every byte or every few: the same body, end and verdict.
    const Outcome whole = decode(in, in.size() ? in.size() : 1);
    for (size_t step : {size_t(1), size_t(3), size_t(7)}) {
        const Outcome cut = decode(in, step);
        if (cut.data != whole.data || cut.done != whole.done || cut.error != whole.error) std::abort();
        if (whole.done && cut.used != whole.used) std::abort();
    }
}
