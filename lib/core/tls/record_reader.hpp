#pragma once
// The receiving half of an encrypted data stream without a relay (docs/design.md,
// "Encryption"): the stream receives records into one buffer of its own (allocated once) and
// opens each whole record from there into the buffer its receive path parses and writes
// from, content back to back. Opening is the copy out of the receive buffer: a record is
// read once by AES-GCM and its plain bytes written once, where it lands for the file write.
// A record cut by the end of a receive stays, moved to the front, until the rest arrives.
#include <cstddef>
#include <memory>
#include <string>

#include "core/tls/record.hpp"

namespace sluice::tls {

class RecordReader {
public:
    // capacity: bytes one receive may bring (at least two records' worth).
    RecordReader(const TrafficKey& rx, std::string what, size_t capacity);
    RecordReader(const RecordReader&) = delete;
    RecordReader& operator=(const RecordReader&) = delete;

    // Where the next receive goes, and how many bytes it may bring.
    unsigned char* room() { return buf_.get() + have_; }
    size_t room_bytes() const { return cap_ - have_; }
    // n bytes arrived at room(): opens every whole record into out (room for n + what was
    // held), returns the plain bytes put there. Throws what Opener::open throws.
    size_t open(size_t n, unsigned char* out);
    // Part of a record is held: an end of the connection now cut it short.
    bool mid_record() const { return have_ > 0; }

private:
    std::string what_; // before opener_, which names the stream by it
    Opener opener_;
    size_t cap_;
    std::unique_ptr<unsigned char[]> buf_;
    size_t have_ = 0;
};

} // namespace sluice::tls
