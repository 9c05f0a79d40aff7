#include "core/tls/record_reader.hpp"

#include <algorithm>
#include <cstring>

namespace sluice::tls {

RecordReader::RecordReader(const TrafficKey& rx, std::string what, size_t capacity)
    : what_(std::move(what)), opener_(rx, what_.c_str()), cap_(std::max(capacity, 2 * (kHeaderBytes + kMaxCiphertext))),
      buf_(new unsigned char[cap_]) {}

size_t RecordReader::open(size_t n, unsigned char* out) {
    have_ += n;
    size_t off = 0, plain = 0;
    const unsigned char* b = buf_.get();
    while (have_ - off >= kHeaderBytes) {
        const size_t size = opener_.record_size(b + off);
        if (have_ - off < size) break;
        plain += opener_.open_to(b + off, size, out + plain);
        off += size;
    }
    // The cut record (at most one, under kMaxCiphertext + a header) to the front.
    if (off > 0) std::memmove(buf_.get(), b + off, have_ - off);
    have_ -= off;
    return plain;
}

} // namespace sluice::tls
