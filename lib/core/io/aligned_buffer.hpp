#pragma once
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

namespace sluice {

// A page-aligned buffer (usable for O_DIRECT and registered buffers). Freed on destruction.
//
// Buffers of 2 MiB and more are mapped on a 2 MiB boundary and marked for transparent huge
// pages: a huge page is one physically contiguous segment, so an O_DIRECT write from it is
// one block-layer segment instead of 512 (virtio-blk here takes 254 segments per request,
// so a 2 MiB write from 4 KiB pages is split into three requests), and copies into it
// touch one TLB entry per 2 MiB. Where the kernel has no huge page to give, the mapping is
// still correct, only made of small pages.
class AlignedBuffer {
public:
    static constexpr size_t kHugePage = size_t{2} << 20;

    explicit AlignedBuffer(size_t size) : size_(size) {
        if (size >= kHugePage) {
            map_huge_aligned();
        } else {
            p_ = static_cast<unsigned char*>(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096));
            if (!p_) throw std::bad_alloc();
        }
    }
    AlignedBuffer(AlignedBuffer&& o) noexcept
        : size_(std::exchange(o.size_, 0)), p_(std::exchange(o.p_, nullptr)), mapped_(std::exchange(o.mapped_, 0)) {}
    AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
        std::swap(size_, o.size_);
        std::swap(p_, o.p_);
        std::swap(mapped_, o.mapped_);
        return *this;
    }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    ~AlignedBuffer() {
        if (mapped_)
            ::munmap(p_, mapped_);
        else
            std::free(p_);
    }

    unsigned char* data() noexcept { return p_; }
    size_t size() const noexcept { return size_; }

private:
    void map_huge_aligned() {
        // Mapped to the page, not to the next huge page: the direct receive path's buffers are
        // 2 MiB and one page of slack, and with THP "always" (this machine) the first touch of
        // that slack page zeroed a second 2 MiB huge page. Encrypted, the slack is written
        // (a record ending a chunk), so each stream zeroed 8 MiB for 16 KiB of slack; first
        // touches here cost ~1.7 ms per MiB (a VM's fresh memory), 8% of the machine's CPU
        // on a 1 GiB encrypted transfer over the veth (perf, docs/benchmarks.md, h18i).
        const size_t len = (size_ + 4095) / 4096 * 4096;
        const size_t huge = size_ / kHugePage * kHugePage; // whole huge pages: the rest stays small
        // Over-map by one huge page, then trim both ends so that the buffer starts on a
        // 2 MiB boundary (mmap only promises 4 KiB alignment).
        void* raw = ::mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) throw std::bad_alloc();
        const auto start = reinterpret_cast<uintptr_t>(raw);
        const uintptr_t aligned = (start + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
        if (aligned > start) ::munmap(raw, aligned - start);
        const uintptr_t tail = start + len + kHugePage - (aligned + len);
        if (tail) ::munmap(reinterpret_cast<void*>(aligned + len), tail);
        p_ = reinterpret_cast<unsigned char*>(aligned);
        mapped_ = len;
        ::madvise(p_, huge, MADV_HUGEPAGE); // advice only: small pages work the same
        if (len > huge) ::madvise(p_ + huge, len - huge, MADV_NOHUGEPAGE);
    }

    size_t size_;
    unsigned char* p_ = nullptr;
    size_t mapped_ = 0; // length of the mapping, 0 when the buffer came from aligned_alloc
};

} // namespace sluice
