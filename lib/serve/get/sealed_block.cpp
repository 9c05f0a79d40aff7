#include "serve/get/sealed_block.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/io/preadv_full.hpp"
#include "core/wire/codec.hpp"

namespace sluice::serve {

namespace {

constexpr size_t kDataRecords = SealedBlock::kMaxData / tls::kMaxPlain;
constexpr size_t kBatch = 16; // records read, hashed and sealed together (256 KiB, L2-sized)
constexpr size_t kPrefix = wire::kFrameHeaderBytes + wire::kBlockPrefixBytes;
static_assert(SealedBlock::kMaxData % tls::kMaxPlain == 0);
static_assert(kBatch <= kPreadvFullMax);

} // namespace

SealedBlock::SealedBlock(const tls::TrafficKey& tx)
    : sealer_(tx), buf_(new unsigned char[(1 + kDataRecords) * tls::kMaxRecord]) {}

int SealedBlock::fill(int fd, uint64_t file_id, uint64_t offset, uint64_t length, uint64_t* sum) {
    const size_t records = static_cast<size_t>((length + tls::kMaxPlain - 1) / tls::kMaxPlain);
    const uint64_t seq = sealer_.take(1 + records); // the prefix first, then the data in order
    hash_.reset();
    size_t wire_bytes = 0;
    uint64_t at = offset;
    for (size_t k = 0; k < records; k += kBatch) {
        const size_t n = std::min(kBatch, records - k);
        iovec iov[kBatch];
        size_t want = 0;
        for (size_t i = 0; i < n; ++i) {
            const size_t len = static_cast<size_t>(std::min<uint64_t>(tls::kMaxPlain, offset + length - at - want));
            iov[i] = {slot(1 + k + i) + tls::kHeaderBytes, len};
            want += len;
        }
        // EIO: shorter than the manifest says
        if (int err = preadv_full(fd, iov, n, static_cast<off_t>(at))) return err;
        for (size_t i = 0; i < n; ++i) {
            hash_.update(iov[i].iov_base, iov[i].iov_len);
            wire_bytes += sealer_.seal_at(slot(1 + k + i), iov[i].iov_len, seq + 1 + k + i);
        }
        at += want;
    }
    *sum = hash_.digest();
    wire::encode_block_prefix(slot(0) + tls::kHeaderBytes, wire::BlockPrefix{file_id, offset, *sum}, static_cast<uint32_t>(length));
    const size_t head = sealer_.seal_at(slot(0), kPrefix, seq);
    iov_[0] = {slot(0), head};
    iov_[1] = {slot(1), wire_bytes}; // full records lie back to back: one run
    left_ = head + wire_bytes;
    return 0;
}

void SealedBlock::seal_frame(const unsigned char* p, size_t n) {
    std::memcpy(slot(0) + tls::kHeaderBytes, p, n);
    iov_[0] = {slot(0), sealer_.seal(slot(0), n)};
    iov_[1] = {slot(1), 0};
    left_ = iov_[0].iov_len;
}

ssize_t SealedBlock::send_some(int sock) {
    msghdr m{};
    const bool head = iov_[0].iov_len > 0;
    m.msg_iov = head ? iov_ : iov_ + 1;
    m.msg_iovlen = head && iov_[1].iov_len ? 2 : 1;
    ssize_t n = ::sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0) return n;
    size_t k = static_cast<size_t>(n);
    left_ -= k;
    for (iovec& v : iov_) {
        const size_t t = std::min(k, v.iov_len);
        v.iov_base = static_cast<unsigned char*>(v.iov_base) + t;
        v.iov_len -= t;
        k -= t;
    }
    return n;
}

} // namespace sluice::serve
