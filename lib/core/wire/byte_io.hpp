#pragma once
// Little-endian encoding into a growable buffer, and bounds-checked decoding from a span.
// Every read from the network goes through ByteReader, which throws instead of overrunning.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/error.hpp"

namespace sluice::wire {

class ByteWriter {
public:
    explicit ByteWriter(std::vector<unsigned char>& out) : out_(out) {}
    void u8(uint8_t v) { out_.push_back(v); }
    void u16(uint16_t v) { put(v, 2); }
    void u32(uint32_t v) { put(v, 4); }
    void u64(uint64_t v) { put(v, 8); }
    void i64(int64_t v) { put(static_cast<uint64_t>(v), 8); }
    void bytes(const void* p, size_t n) {
        auto b = static_cast<const unsigned char*>(p);
        out_.insert(out_.end(), b, b + n);
    }
    void bytes(std::string_view s) { bytes(s.data(), s.size()); }
    size_t size() const { return out_.size(); }
    // Overwrites a u32 written earlier (a length known only once the body is written).
    void patch_u32(size_t at, uint32_t v) {
        for (int i = 0; i < 4; ++i) out_[at + i] = static_cast<unsigned char>(v >> (8 * i));
    }

private:
    void put(uint64_t v, int n) {
        for (int i = 0; i < n; ++i) out_.push_back(static_cast<unsigned char>(v >> (8 * i)));
    }
    std::vector<unsigned char>& out_;
};

class ByteReader {
public:
    ByteReader(std::span<const unsigned char> in, const char* what) : in_(in), what_(what) {}
    uint8_t u8() { return static_cast<uint8_t>(get(1)); }
    uint16_t u16() { return static_cast<uint16_t>(get(2)); }
    uint32_t u32() { return static_cast<uint32_t>(get(4)); }
    uint64_t u64() { return get(8); }
    int64_t i64() { return static_cast<int64_t>(get(8)); }
    std::span<const unsigned char> bytes(size_t n) {
        need(n);
        auto s = in_.subspan(pos_, n);
        pos_ += n;
        return s;
    }
    std::string string(size_t n) {
        auto s = bytes(n);
        return std::string(reinterpret_cast<const char*>(s.data()), s.size());
    }
    size_t remaining() const { return in_.size() - pos_; }
    void expect_end() const {
        if (remaining() != 0)
            throw Error(ErrorCode::protocol,
                        std::string(what_) + ": " + std::to_string(remaining()) + " unexpected trailing bytes");
    }

private:
    void need(size_t n) const {
        if (n > remaining())
            throw Error(ErrorCode::protocol, std::string(what_) + ": truncated (needs " + std::to_string(n) +
                                                 " more bytes, has " + std::to_string(remaining()) + ")");
    }
    uint64_t get(int n) {
        need(static_cast<size_t>(n));
        uint64_t v = 0;
        for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(in_[pos_ + i]) << (8 * i);
        pos_ += static_cast<size_t>(n);
        return v;
    }
    std::span<const unsigned char> in_;
    size_t pos_ = 0;
    const char* what_;
};

} // namespace sluice::wire
