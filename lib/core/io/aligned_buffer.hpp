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
//
// Pages::small_first: the same aligned mapping, held to small pages until prefer_huge(). The
// first touch of a huge page zeroes all 2 MiB (~1 GB/s on this VM): a receive stream carrying
// a few small files of an update touched 4 buffers' first huge page, 32 MiB zeroed over 4
// streams, a fifth of the receiver's CPU (perf, session 14); small pages zero what is used.
class AlignedBuffer {
public:
    static constexpr size_t kHugePage = size_t{2} << 20;
    enum class Pages { huge, small_first };

    explicit AlignedBuffer(size_t size, Pages pages = Pages::huge) : size_(size) {
        if (size >= kHugePage) {
            map_huge_aligned(pages);
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

    // A small_first buffer from here on backed by huge pages: its contents are dropped (the
    // caller has nothing in it: no write in flight reads it) so that the next touch of each
    // 2 MiB faults in a huge page instead of keeping the small pages already there. False
    // where the buffer is not a mapping of its own or the kernel refused the advice.
    bool prefer_huge() noexcept {
        if (!mapped_ || whole_huge() == 0) return false;
        return ::madvise(p_, whole_huge(), MADV_HUGEPAGE) == 0 && ::madvise(p_, mapped_, MADV_DONTNEED) == 0;
    }

private:
    void map_huge_aligned(Pages pages) {
        // Mapped to the page, not to the next huge page: the direct receive path's buffers are
        // 2 MiB and one page of slack, and with THP "always" (this machine) the first touch of
        // that slack page zeroed a second 2 MiB huge page. Encrypted, the slack is written
        // (a record ending a chunk), so each stream zeroed 8 MiB for 16 KiB of slack; first
        // touches here cost ~1.7 ms per MiB (a VM's fresh memory), 8% of the machine's CPU
        // on a 1 GiB encrypted transfer over the veth (perf, docs/benchmarks.md, h18i).
        const size_t len = (size_ + 4095) / 4096 * 4096;
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
        // Advice only: small pages work the same. NOHUGEPAGE, not no advice: with THP "always"
        // the kernel would give huge pages unasked.
        if (pages == Pages::huge) ::madvise(p_, whole_huge(), MADV_HUGEPAGE);
        if (pages == Pages::small_first || len > whole_huge()) {
            const size_t from = pages == Pages::huge ? whole_huge() : 0;
            ::madvise(p_ + from, len - from, MADV_NOHUGEPAGE);
        }
    }

    // The buffer's whole huge pages: the rest stays small.
    size_t whole_huge() const noexcept { return size_ / kHugePage * kHugePage; }

    size_t size_;
    unsigned char* p_ = nullptr;
    size_t mapped_ = 0; // length of the mapping, 0 when the buffer came from aligned_alloc
};

} // namespace sluice
