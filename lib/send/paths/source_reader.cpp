#include "send/paths/source_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "core/io/mapped_region.hpp"
#include "core/io/sys_error.hpp"
#include "core/checksum/xxh3.hpp"

#include <algorithm>

namespace sluice {

namespace {

void check_identity(int fd, const SourceFile& f, const char* when) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_errno(ErrorCode::source, "cannot stat source '" + f.path + "'");
    int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    const uint64_t size = f.fd >= 0 ? f.file_size : f.size;
    const int64_t mtime_listed = f.fd >= 0 ? f.file_mtime_ns : f.mtime_ns;
    if (static_cast<uint64_t>(st.st_size) != size || mtime != mtime_listed)
        throw Error(ErrorCode::source, "source '" + f.path + "' changed " + when + " (size " + std::to_string(size) + " -> " +
                                           std::to_string(st.st_size) + (mtime != mtime_listed ? ", mtime changed" : "") +
                                           "); run the transfer again");
}

} // namespace

int SourceReader::open(const SourceFile& f) {
    if (current_ == &f) return fd_.get();
    check_unchanged();
    // A caller's fd is reopened (following the /proc magic link is the point), never dup'ed:
    // paths change file status flags (O_DIRECT) on the fd they read from.
    fd_.reset(f.fd >= 0 ? ::open(("/proc/self/fd/" + std::to_string(f.fd)).c_str(), O_RDONLY | O_CLOEXEC)
                        : ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    current_ = nullptr;
    if (!fd_) throw_errno(ErrorCode::source, "cannot open source '" + f.path + "'");
    check_identity(fd_.get(), f, "after it was listed");
    current_ = &f;
    return fd_.get();
}

void SourceReader::check_unchanged() {
    if (current_) check_identity(fd_.get(), *current_, "while it was being sent");
}

void SourceReader::read_whole(const SourceFile& f, unsigned char* out) {
    int fd = open(f);
    uint64_t done = 0;
    while (done < f.size) {
        ssize_t n = ::pread(fd, out + done, static_cast<size_t>(f.size - done), static_cast<off_t>(f.file_offset(done)));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno(ErrorCode::source, "cannot read source '" + f.path + "'");
        if (n == 0) throw Error(ErrorCode::source, "source '" + f.path + "' shrank while being sent");
        done += static_cast<uint64_t>(n);
    }
    check_unchanged();
}

uint64_t SourceReader::checksum(const SourceFile& f, uint64_t offset, uint64_t length) {
    // A block after the file's first was opened for: check the file has not changed since.
    if (current_ == &f) check_unchanged();
    int fd = open(f);
    // Read through mappings of at most kWindow bytes at a time: the process then maps (and
    // counts in its RSS) one window per stream, not one block, whatever --block-size is.
    if (length <= kWindow) {
        MappedRegion map(fd, f.file_offset(offset), length);
        if (map.ok()) return xxh3_64(map.data(), length);
    } else {
        hash_.reset();
        uint64_t done = 0;
        for (; done < length; done += kWindow) {
            const size_t n = static_cast<size_t>(std::min<uint64_t>(kWindow, length - done));
            MappedRegion map(fd, f.file_offset(offset + done), n);
            if (!map.ok()) break;
            hash_.update(map.data(), n);
        }
        if (done >= length) return hash_.digest();
    }
    // Some file systems cannot be mapped: read the block once instead, and say so.
    read_fallback_ = true;
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    fallback_buf_.resize(1 << 20);
    uint64_t done = 0;
    while (done < length) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(fallback_buf_.size(), length - done));
        ssize_t n = ::pread(fd, fallback_buf_.data(), want, static_cast<off_t>(f.file_offset(offset + done)));
        if (n <= 0) {
            XXH3_freeState(st);
            if (n == 0) throw Error(ErrorCode::source, "source '" + f.path + "' shrank while being sent");
            throw_errno(ErrorCode::source, "cannot read source '" + f.path + "'");
        }
        XXH3_64bits_update(st, fallback_buf_.data(), static_cast<size_t>(n));
        done += static_cast<uint64_t>(n);
    }
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

} // namespace sluice
