#pragma once
// One encrypted data stream's block on the get ring (docs/design.md, "Encryption"): the
// stream's buffer of TLS record slots, allocated once when its handshake ends, into which the
// checksum pool reads a block's bytes straight into the records' content, hashes and seals
// them in place (as the session threads' tls_records path does), then seals the BLOCK prefix,
// which carries the checksum, under the sequence number it took first. The ring then sends the
// records with non-blocking sendmsg calls. Nothing is allocated per block or record.
//
// One block at a time: the pool fills it while the ring sends nothing on this stream, the ring
// sends it while the pool does not touch it (the SumPool's queue orders the two).
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/checksum/xxh3.hpp"
#include "core/tls/record.hpp"
#include "sluice/error.hpp"

namespace sluice::serve {

class SealedBlock {
public:
    // The most file bytes one block carries: the session threads' block size with user-space
    // records (small enough that a block read, hashed and sealed is still in the cache).
    static constexpr uint64_t kMaxData = uint64_t{1} << 20;

    explicit SealedBlock(const tls::TrafficKey& tx);
    SealedBlock(const SealedBlock&) = delete;
    SealedBlock& operator=(const SealedBlock&) = delete;

    // On the pool: [offset, offset + length) of fd (length at most kMaxData) read into the
    // records, hashed (*sum) and sealed, then its BLOCK prefix (naming file_id). Returns 0, or
    // the read's errno (EIO for a file that got shorter).
    int fill(int fd, uint64_t file_id, uint64_t offset, uint64_t length, uint64_t* sum);
    // On the ring, with nothing pending: small frame bytes (STREAM_END) as one record.
    void seal_frame(const unsigned char* p, size_t n);

    bool pending() const { return left_ > 0; }
    // Sends what is pending on sock (MSG_DONTWAIT): the bytes sent, or -1 with errno.
    ssize_t send_some(int sock);

private:
    unsigned char* slot(size_t k) { return buf_.get() + k * tls::kMaxRecord; }

    tls::Sealer sealer_;
    Xxh3 hash_;
    std::unique_ptr<unsigned char[]> buf_; // slot 0: the prefix (or a frame); 1..: the data records
    iovec iov_[2]{};                        // what is left to send: the head record, the data records
    size_t left_ = 0;
};

} // namespace sluice::serve
