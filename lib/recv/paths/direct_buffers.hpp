#pragma once
// The direct receive path's block buffers (direct_receiver.cpp): kCount page-aligned buffers of
// kBytes, each received into and then written from with O_DIRECT. On small pages until the
// stream has carried kGrowAfter bytes, then on huge pages and registered with the ring
// (WRITE_FIXED). A stream carrying the few small files of an update rotates through all four
// buffers (a small file's write stays in flight while the next is received): on huge pages
// from the start that zeroed 4 x 2 MiB per stream, 32 MiB for 4 streams, 22% of the
// receiver's CPU in a 1% update of the minor set (perf, session 14); on small pages only the
// pages used are zeroed. Registering, too, pins and so zeroes every page: also deferred.
#include <sys/uio.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "core/io/aligned_buffer.hpp"
#include "core/ring/ring.hpp"
#include "recv/paths/direct_layout.hpp"

namespace sluice {

class DirectBuffers {
public:
    static constexpr size_t kBytes = 2 << 20;
    // Room each buffer has past kBytes: a TLS record whose content ends a chunk is opened
    // there whole (its content type byte lands one past the end; RecordReader::read's spare).
    static constexpr size_t kSlack = direct_layout::kAlign;
    static constexpr int kCount = 4;
    static constexpr uint64_t kGrowAfter = uint64_t{32} << 20;

    DirectBuffers() : bufs_{make(), make(), make(), make()} {}

    unsigned char* data(int c) noexcept { return bufs_[c].data(); }
    int fixed_index(int c) const noexcept { return fixed_ ? c : -1; } // for Ring::write
    bool grown() const noexcept { return grown_; }

    // Counts a block of len bytes about to be received; true once, when the buffers are due
    // to grow(). The caller then waits for every write in flight first.
    bool due(uint64_t len) noexcept { return !grown_ && (carried_ += len) >= kGrowAfter; }

    // Every buffer idle (no write reads from it): their pages dropped and taken again as huge
    // pages, then registered; a registration the kernel refuses is kept in register_error.
    void grow(Ring& ring, std::string& register_error) {
        grown_ = true;
        for (AlignedBuffer& b : bufs_) b.prefer_huge(); // advice: small pages still work
        iovec iov[kCount];
        for (int i = 0; i < kCount; ++i) iov[i] = {bufs_[i].data(), kBytes};
        const int rc = ring.register_buffers(iov);
        fixed_ = rc == 0;
        if (rc < 0) register_error = std::strerror(-rc);
    }

private:
    static AlignedBuffer make() { return AlignedBuffer(kBytes + kSlack, AlignedBuffer::Pages::small_first); }

    AlignedBuffer bufs_[kCount];
    uint64_t carried_ = 0; // bytes of blocks until grow()
    bool grown_ = false;
    bool fixed_ = false;
};

} // namespace sluice
