#pragma once
#include <cstdlib>
#include <memory>

namespace sluice {

// A page-aligned heap buffer (usable for O_DIRECT and registered buffers). Freed on destruction.
class AlignedBuffer {
public:
    explicit AlignedBuffer(size_t size) : size_(size), p_(static_cast<unsigned char*>(std::aligned_alloc(4096, size))) {
        if (!p_) throw std::bad_alloc();
    }
    unsigned char* data() noexcept { return p_.get(); }
    size_t size() const noexcept { return size_; }

private:
    struct Free {
        void operator()(unsigned char* p) const noexcept { std::free(p); }
    };
    size_t size_;
    std::unique_ptr<unsigned char, Free> p_;
};

} // namespace sluice
