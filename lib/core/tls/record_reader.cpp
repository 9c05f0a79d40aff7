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

size_t RecordReader::next_record() const {
    if (have_ - off_ < kHeaderBytes) return 0;
    const size_t size = opener_.record_size(buf_.get() + off_);
    return have_ - off_ >= size ? size : 0;
}

size_t RecordReader::open_next(unsigned char* out) {
    const size_t size = next_record();
    const size_t plain = opener_.open_to(buf_.get() + off_, size, out);
    off_ += size;
    return plain;
}

void RecordReader::settle() {
    if (off_ == 0) return;
    std::memmove(buf_.get(), buf_.get() + off_, have_ - off_);
    have_ -= off_;
    off_ = 0;
}

size_t RecordReader::take(unsigned char* out, size_t n, bool spare) {
    size_t got = std::min(n, rest_n_);
    if (got) {
        std::memcpy(out, rest_, got);
        rest_ += got;
        rest_n_ -= got;
    }
    unsigned char* b = buf_.get();
    while (got < n && have_ - off_ >= kHeaderBytes) {
        const size_t size = opener_.record_size(b + off_);
        if (have_ - off_ < size) break;
        // Opening writes the content, the type byte and any padding: size less header and tag.
        if (size - kHeaderBytes - kTagBytes <= n - got + (spare ? 1 : 0)) {
            got += opener_.open_to(b + off_, size, out + got);
        } else {
            const size_t len = opener_.open(b + off_, size);
            const size_t part = std::min(len, n - got);
            std::memcpy(out + got, b + off_ + kHeaderBytes, part);
            got += part;
            rest_ = b + off_ + kHeaderBytes + part;
            rest_n_ = len - part;
        }
        off_ += size;
    }
    return got;
}

void RecordReader::compact() {
    if (rest_n_ > 0 || off_ == 0) return;
    std::memmove(buf_.get(), buf_.get() + off_, have_ - off_);
    have_ -= off_;
    off_ = 0;
}

size_t RecordReader::need(size_t n) const {
    size_t bound = n + (n + kMaxPlain - 1) / kMaxPlain * kRecordOverhead;
    const size_t held = have_ - off_;
    if (held >= kHeaderBytes) bound = std::max(bound, opener_.record_size(buf_.get() + off_));
    // A cut record is shorter than its size, and held < kHeaderBytes < bound: at least 1.
    return std::min(bound - held, cap_ - have_);
}

} // namespace sluice::tls
