#pragma once
// A provided-buffer ring (Linux 5.19+, liburing 2.3's io_uring_register_buf_ring): a group of
// equal buffers the kernel picks from when a receive completes, so a connection that is idle
// holds no receive buffer at all; only data that has arrived occupies one, until give_back().
// The memory is owned here and outlives its registration (unregistered first).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/ring/ring.hpp"

struct io_uring_buf_ring;

namespace sluice {

class ProvidedBuffers {
public:
    // Registers `count` (a power of two, <= 32768) buffers of `size` bytes as `group` of ring.
    // Returns nullptr and sets *err to the kernel's errno where it refuses (kernels before
    // 5.19): the caller takes its slower path and says so.
    static std::unique_ptr<ProvidedBuffers> create(Ring& ring, uint16_t group, unsigned count, unsigned size, int* err);
    ~ProvidedBuffers();
    ProvidedBuffers(const ProvidedBuffers&) = delete;
    ProvidedBuffers& operator=(const ProvidedBuffers&) = delete;

    uint16_t group() const { return group_; }
    unsigned size() const { return size_; }
    // The buffer a receive CQE names (its flags >> IORING_CQE_BUFFER_SHIFT).
    char* data(uint16_t id) const { return memory_.get() + static_cast<size_t>(id) * size_; }
    // Hands a buffer back to the kernel once its bytes have been consumed.
    void give_back(uint16_t id);

private:
    ProvidedBuffers(Ring& ring, uint16_t group, unsigned count, unsigned size);
    Ring& ring_;
    uint16_t group_;
    unsigned count_;
    unsigned size_;
    io_uring_buf_ring* br_ = nullptr; // page-aligned, count entries (mmap'd)
    size_t br_bytes_ = 0;
    std::unique_ptr<char[]> memory_;
    bool registered_ = false;
};

} // namespace sluice
