#pragma once
// The TLS 1.3 record layer (RFC 8446 5.2) for application data, in user space: AES-128-GCM
// by the process's record engine (aes_gcm.hpp: intel-ipsec-mb's VAES path or OpenSSL's EVP),
// sealed and opened in place, one key schedule per direction set up once, nothing allocated
// per record. The records are exactly TLS 1.3's
// (type 23, version 0x0303, length; nonce = IV xor the record's sequence number; the header
// as associated data), so the kernel's TLS (ktls.hpp) can take over either direction with the
// same keys. Sequence numbers are implicit: a record replayed, dropped, reordered or altered
// fails its tag, and the connection with it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tls/aes_gcm.hpp"
#include "core/tls/keys.hpp"
#include "sluice/error.hpp"

namespace sluice::tls {

inline constexpr size_t kHeaderBytes = 5;
inline constexpr size_t kMaxPlain = 16384; // TLS's limit on a record's content (2^14)
// A record around kMaxPlain bytes of content: header, content type byte, tag.
inline constexpr size_t kRecordOverhead = kHeaderBytes + 1 + kTagBytes;
inline constexpr size_t kMaxRecord = kMaxPlain + kRecordOverhead;
// The most a peer's record may claim (RFC 8446: 2^14 + 256 of ciphertext).
inline constexpr size_t kMaxCiphertext = kMaxPlain + 256;

class CipherCtx {
public:
    CipherCtx(const TrafficKey& k, bool encrypt);
    // The same with the given engine (tests: records of one engine open with the other).
    CipherCtx(const TrafficKey& k, bool encrypt, GcmEngine engine);
    uint64_t sequence() const { return seq_; }

protected:
    // The nonce of record seq.
    void nonce_of(uint64_t seq, unsigned char out[kIvBytes]) const;
    AesGcm gcm_;
    unsigned char iv_[kIvBytes];
    uint64_t seq_ = 0;
};

class Sealer : public CipherCtx {
public:
    explicit Sealer(const TrafficKey& k) : CipherCtx(k, true) {}
    Sealer(const TrafficKey& k, GcmEngine engine) : CipherCtx(k, true, engine) {}
    // rec points at a record slot whose content (plain bytes) is already at rec + kHeaderBytes
    // and that has kRecordOverhead - kHeaderBytes bytes of room after it. Writes the header,
    // encrypts in place, appends type and tag; returns the record's size on the wire.
    size_t seal(unsigned char* rec, size_t plain) { return seal_at(rec, plain, seq_++); }
    // For a writer that fills records out of order (record_writer.hpp: a block's data is read
    // and sealed before its prefix, which carries the data's checksum): takes n sequence
    // numbers and returns the first; seal_at() then seals a record with one of them.
    uint64_t take(uint64_t n) {
        const uint64_t first = seq_;
        seq_ += n;
        return first;
    }
    size_t seal_at(unsigned char* rec, size_t plain, uint64_t seq);
    // The same with the content at `from` (n bytes, not overlapping rec): encrypted into the
    // record's slot, never copied there first.
    size_t seal_from(unsigned char* rec, const unsigned char* from, size_t n, uint64_t seq);
    // Frames of a control connection (n bytes at plain) sealed into records of at most
    // kMaxPlain each, appended to wire (whose capacity is kept: no allocation once it has grown).
    void seal_append(const unsigned char* plain, size_t n, std::vector<unsigned char>& wire);
};

class Opener : public CipherCtx {
public:
    // what: "data stream 2", for messages.
    Opener(const TrafficKey& k, const char* what) : CipherCtx(k, false), what_(what) {}
    Opener(const TrafficKey& k, const char* what, GcmEngine engine) : CipherCtx(k, false, engine), what_(what) {}
    // Bytes of the record starting at hdr (kHeaderBytes available), checked against the limits.
    size_t record_size(const unsigned char* hdr) const;
    // Decrypts the whole record at rec in place; returns its content's length (at rec +
    // kHeaderBytes). Throws integrity when the tag does not match, protocol for a record that
    // is not application data (an alert included).
    size_t open(unsigned char* rec, size_t size) { return open_to(rec, size, rec + kHeaderBytes); }
    // The same, decrypting into out (not overlapping the record; room for size bytes): the
    // content of consecutive records lands back to back, ready for one write.
    size_t open_to(const unsigned char* rec, size_t size, unsigned char* out);

private:
    Error alert_error(unsigned char description) const;
    const char* what_;
};

} // namespace sluice::tls
