#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace sluice {

// A read-only mapping of part of a file: lets a checksum read page-cache pages in place
// instead of copying them into a user buffer. Unmapped on destruction.
class MappedRegion {
public:
    MappedRegion() = default;
    // offset need not be page aligned; the mapping is widened to the page below.
    MappedRegion(int fd, uint64_t offset, size_t length, int prot = PROT_READ) {
        if (length == 0) return;
        const uint64_t page = 4096;
        const uint64_t aligned = offset & ~(page - 1);
        slack_ = offset - aligned;
        map_len_ = length + slack_;
        void* p = ::mmap(nullptr, map_len_, prot, MAP_SHARED | MAP_POPULATE, fd, static_cast<off_t>(aligned));
        if (p == MAP_FAILED) {
            map_len_ = 0;
            return;
        }
        base_ = static_cast<unsigned char*>(p);
        ::madvise(base_, map_len_, MADV_SEQUENTIAL);
    }
    MappedRegion(MappedRegion&& o) noexcept
        : base_(std::exchange(o.base_, nullptr)), map_len_(std::exchange(o.map_len_, 0)), slack_(o.slack_) {}
    MappedRegion& operator=(MappedRegion&& o) noexcept {
        std::swap(base_, o.base_);
        std::swap(map_len_, o.map_len_);
        std::swap(slack_, o.slack_);
        return *this;
    }
    MappedRegion(const MappedRegion&) = delete;
    MappedRegion& operator=(const MappedRegion&) = delete;
    ~MappedRegion() {
        if (base_) ::munmap(base_, map_len_);
    }
    bool ok() const noexcept { return base_ != nullptr; }
    const unsigned char* data() const noexcept { return base_ + slack_; }

private:
    unsigned char* base_ = nullptr;
    size_t map_len_ = 0;
    uint64_t slack_ = 0;
};

} // namespace sluice
