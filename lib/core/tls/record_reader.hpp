#pragma once
// The receiving half of an encrypted data stream without a relay (docs/design.md,
// "Encryption"): the stream receives records into one buffer of its own (allocated once) and
// opens each whole record from there into the buffer its receive path parses and writes
// from, content back to back. Opening is the copy out of the receive buffer: a record is
// read once by AES-GCM and its plain bytes written once, where it lands for the file write.
// A record cut by the end of a receive stays, moved to the front, until the rest arrives.
//
// Two ways to use it: open() opens everything received into one buffer (recv_write's
// parser takes it from there); read() pulls exactly the plain bytes asked for, opening each
// record straight into the caller's memory (the direct path's aligned buffers, written from
// with O_DIRECT) and only a record that runs past the end of the request in place, its rest
// copied out by the next read().
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
    // open(), a record at a time, for a caller that picks where each record's content goes (the
    // hosted path opens block data straight into its O_DIRECT stage): arrived(n) counts n bytes
    // received at room(); next_record() is the size on the wire of the next whole record held
    // (0: none), whose content and type byte need that less kHeaderBytes and kTagBytes at out;
    // open_next(out) opens it there and returns its content's bytes; settle() moves the cut
    // record to the front before the next receive. Throws what Opener::open throws.
    void arrived(size_t n) { have_ += n; }
    size_t next_record() const;
    size_t open_next(unsigned char* out);
    void settle();
    // Part of a record is held: an end of the connection now cut it short.
    bool mid_record() const { return have_ > off_; }
    // Bytes received and not opened yet (part of a record).
    size_t unopened() const { return have_ - off_; }
    // Anything is held: part of a record, whole records or opened bytes not read yet.
    bool holding() const { return have_ > off_ || rest_n_ > 0; }

    // Puts exactly n plain bytes at out. receive(p, least, most) must bring between least
    // and most bytes of the connection to p (least >= 1), or throw. A record is opened
    // straight into out only when its content and its content type byte (decrypted after it,
    // then cut off) fit; spare: the byte at out + n may be overwritten, so a record whose
    // content ends exactly at n does too. Throws what Opener::open throws.
    template <class Receive>
    void read(unsigned char* out, size_t n, bool spare, Receive&& receive) {
        size_t got = take(out, n, spare);
        while (got < n) {
            compact();
            const size_t least = need(n - got);
            have_ += receive(buf_.get() + have_, least, cap_ - have_);
            got += take(out + got, n - got, spare);
        }
    }

private:
    // Plain bytes to out from what is held, up to n; fewer when more must be received.
    size_t take(unsigned char* out, size_t n, bool spare);
    // Moves a cut record to the front (only when nothing opened is left to take).
    void compact();
    // Bytes to receive at least before n more plain bytes can be taken: n plain bytes come in
    // at least n / kMaxPlain records, each with kRecordOverhead bytes around its content.
    size_t need(size_t n) const;

    std::string what_; // before opener_, which names the stream by it
    Opener opener_;
    size_t cap_;
    std::unique_ptr<unsigned char[]> buf_;
    size_t off_ = 0;  // read(): the first byte not opened yet
    size_t have_ = 0; // bytes received into buf_
    const unsigned char* rest_ = nullptr; // read(): a record opened in place, not all taken
    size_t rest_n_ = 0;
};

} // namespace sluice::tls
