#include "core/ring/provided_buffers.hpp"

#include <sys/mman.h>

#include <cerrno>

namespace sluice {

ProvidedBuffers::ProvidedBuffers(Ring& ring, uint16_t group, unsigned count, unsigned size)
    : ring_(ring), group_(group), count_(count), size_(size) {}

std::unique_ptr<ProvidedBuffers> ProvidedBuffers::create(Ring& ring, uint16_t group, unsigned count, unsigned size,
                                                         int* err) {
    *err = 0;
    if (count == 0 || count > 32768 || (count & (count - 1)) != 0) {
        *err = EINVAL;
        return nullptr;
    }
    std::unique_ptr<ProvidedBuffers> p(new ProvidedBuffers(ring, group, count, size));
    p->br_bytes_ = count * sizeof(io_uring_buf);
    void* m = ::mmap(nullptr, p->br_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (m == MAP_FAILED) {
        *err = errno;
        return nullptr;
    }
    p->br_ = static_cast<io_uring_buf_ring*>(m);
    int rc = ring.register_buf_ring(p->br_, count, group);
    if (rc < 0) {
        *err = -rc;
        return nullptr; // the destructor unmaps
    }
    p->registered_ = true;
    p->memory_.reset(new char[static_cast<size_t>(count) * size]);
    io_uring_buf_ring_init(p->br_);
    const int mask = io_uring_buf_ring_mask(count);
    for (unsigned i = 0; i < count; ++i)
        io_uring_buf_ring_add(p->br_, p->data(static_cast<uint16_t>(i)), size, static_cast<unsigned short>(i), mask,
                              static_cast<int>(i));
    io_uring_buf_ring_advance(p->br_, static_cast<int>(count));
    return p;
}

ProvidedBuffers::~ProvidedBuffers() {
    if (registered_) ring_.unregister_buf_ring(group_);
    if (br_) ::munmap(br_, br_bytes_);
}

void ProvidedBuffers::give_back(uint16_t id) {
    io_uring_buf_ring_add(br_, data(id), size_, id, io_uring_buf_ring_mask(count_), 0);
    io_uring_buf_ring_advance(br_, 1);
}

} // namespace sluice
