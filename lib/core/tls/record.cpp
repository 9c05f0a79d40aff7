#include "core/tls/record.hpp"

#include <cstring>
#include <string>

#include "sluice/error.hpp"

namespace sluice::tls {

namespace {
constexpr unsigned char kApplicationData = 23;
constexpr unsigned char kAlert = 21;

// The record header (the associated data) of a record of `plain` content bytes.
void write_header(unsigned char* rec, size_t plain) {
    const size_t body = plain + 1 + kTagBytes;
    rec[0] = kApplicationData;
    rec[1] = 3;
    rec[2] = 3;
    rec[3] = static_cast<unsigned char>(body >> 8);
    rec[4] = static_cast<unsigned char>(body);
}

} // namespace

CipherCtx::CipherCtx(const TrafficKey& k, bool encrypt) : gcm_(k.key.data(), encrypt) {
    std::memcpy(iv_, k.iv.data(), kIvBytes);
}

CipherCtx::CipherCtx(const TrafficKey& k, bool encrypt, GcmEngine engine) : gcm_(k.key.data(), encrypt, engine) {
    std::memcpy(iv_, k.iv.data(), kIvBytes);
}

void CipherCtx::nonce_of(uint64_t seq, unsigned char out[kIvBytes]) const {
    std::memcpy(out, iv_, kIvBytes);
    for (int i = 0; i < 8; ++i) out[kIvBytes - 1 - i] ^= static_cast<unsigned char>(seq >> (8 * i));
}

size_t Sealer::seal_at(unsigned char* rec, size_t plain, uint64_t seq) {
    const size_t body = plain + 1 + kTagBytes;
    write_header(rec, plain);
    unsigned char* data = rec + kHeaderBytes;
    data[plain] = kApplicationData; // the inner content type
    unsigned char nonce[kIvBytes];
    nonce_of(seq, nonce);
    gcm_.seal(nonce, rec, kHeaderBytes, data, plain + 1, data + plain + 1);
    return kHeaderBytes + body;
}

size_t Sealer::seal_from(unsigned char* rec, const unsigned char* from, size_t n, uint64_t seq) {
    write_header(rec, n);
    unsigned char nonce[kIvBytes];
    nonce_of(seq, nonce);
    unsigned char* data = rec + kHeaderBytes;
    gcm_.seal_from(nonce, rec, kHeaderBytes, from, n, kApplicationData, data, data + n + 1);
    return kHeaderBytes + n + 1 + kTagBytes;
}

void Sealer::seal_append(const unsigned char* plain, size_t n, std::vector<unsigned char>& wire) {
    for (size_t at = 0; at < n;) {
        const size_t take = n - at < kMaxPlain ? n - at : kMaxPlain, base = wire.size();
        wire.resize(base + take + kRecordOverhead);
        wire.resize(base + seal_from(wire.data() + base, plain + at, take, seq_++));
        at += take;
    }
}

size_t Opener::record_size(const unsigned char* hdr) const {
    const size_t body = size_t(hdr[3]) << 8 | hdr[4];
    if (hdr[0] != kApplicationData || hdr[1] != 3 || hdr[2] != 3)
        throw Error(ErrorCode::protocol, std::string("TLS record on ") + what_ + ": not an application data record (type " +
                                             std::to_string(hdr[0]) + ")");
    if (body < 1 + kTagBytes || body > kMaxCiphertext)
        throw Error(ErrorCode::protocol, std::string("TLS record on ") + what_ + ": length " + std::to_string(body) +
                                             " outside 17.." + std::to_string(kMaxCiphertext));
    return kHeaderBytes + body;
}

// In TLS 1.3 a client's handshake ends before the server has judged its certificate: a
// server that refuses it (certificate mode, docs/protocol.md) says so in the first record.
Error Opener::alert_error(unsigned char description) const {
    const std::string head = std::string("the peer ended ") + what_ + " with a TLS alert";
    if (description == 116)
        return Error(ErrorCode::auth, head + ": it requires a certificate from this side (it has --ca or --pin): give this "
                                             "side --cert and --key");
    if (description == 44) // certificate_revoked: the peer's --crl lists this side's certificate
        return Error(ErrorCode::auth, head + " (44): it refused this side's certificate as revoked (a CRL of its --crl "
                                             "lists it); this side needs a certificate that is not revoked");
    if (description == 42 || description == 43 || description == 45 || description == 46 ||
        description == 48)
        return Error(ErrorCode::auth, head + " (" + std::to_string(description) + "): it refused this side's certificate; "
                                             "check its --pin or --ca against this side's --cert");
    return Error(ErrorCode::network, head, ErrorCause::peer_closed);
}

size_t Opener::open_to(const unsigned char* rec, size_t size, unsigned char* data) {
    const size_t ct = size - kHeaderBytes - kTagBytes;
    const unsigned char* in = rec + kHeaderBytes;
    unsigned char nonce[kIvBytes];
    const uint64_t seq = seq_++;
    nonce_of(seq, nonce);
    // The tag is copied first: decrypting in place overwrites nothing past ct, but out of
    // place the caller's next record may already be what follows.
    unsigned char tag[kTagBytes];
    std::memcpy(tag, in + ct, kTagBytes);
    if (!gcm_.open(nonce, rec, kHeaderBytes, in, data, ct, tag))
        throw Error(ErrorCode::integrity, std::string("TLS record ") + std::to_string(seq) + " on " + what_ +
                                              " failed authentication: altered, replayed, reordered or dropped in flight");
    size_t len = ct;
    while (len > 0 && data[len - 1] == 0) --len; // padding
    if (len == 0) throw Error(ErrorCode::protocol, std::string("TLS record on ") + what_ + " without a content type");
    const unsigned char type = data[--len];
    if (type == kAlert) throw alert_error(len >= 2 ? data[1] : 0);
    if (type != kApplicationData)
        throw Error(ErrorCode::protocol, std::string("TLS record on ") + what_ + " of content type " + std::to_string(type) +
                                             " (only application data is expected after the handshake)");
    return len;
}

} // namespace sluice::tls
