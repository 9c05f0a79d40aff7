#include "send/paths/source_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/io/file_times.hpp"
#include "core/io/sys_error.hpp"

namespace sluice {

namespace {

void check_identity(int fd, const SourceFile& f, const char* when) {
    struct stat st = {};
    if (::fstat(fd, &st) != 0) throw_errno(ErrorCode::source, "cannot stat source '" + f.path + "'");
    const uint64_t size = f.fd >= 0 ? f.file_size : f.size;
    const int64_t mtime_listed = f.fd >= 0 ? f.file_mtime_ns : f.mtime_ns;
    const auto mtime = ns_of(st.st_mtim);
    if (static_cast<uint64_t>(st.st_size) != size || mtime != mtime_listed)
        throw Error(ErrorCode::source, "source '" + f.path + "' changed " + when + " (size " + std::to_string(size) + " -> " +
                                           std::to_string(st.st_size) + (mtime != mtime_listed ? ", mtime changed" : "") +
                                           "); run the transfer again");
}

} // namespace

size_t SourceReader::pread_full(int fd, const SourceFile& f, unsigned char* out, size_t want, uint64_t file_offset) {
    size_t got = 0;
    while (got < want) {
        ssize_t n = ::pread(fd, out + got, want - got, static_cast<off_t>(file_offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno(ErrorCode::source, "cannot read source '" + f.path + "'");
        if (n == 0) break;
        got += static_cast<size_t>(n);
    }
    return got;
}

size_t SourceReader::preadv_full(int fd, const SourceFile& f, iovec* iov, size_t n, uint64_t file_offset) {
    size_t got = 0, first = 0;
    while (first < n) {
        ssize_t m = ::preadv(fd, iov + first, static_cast<int>(n - first), static_cast<off_t>(file_offset + got));
        if (m < 0 && errno == EINTR) continue;
        if (m < 0) throw_errno(ErrorCode::source, "cannot read source '" + f.path + "'");
        if (m == 0) break;
        got += static_cast<size_t>(m);
        for (auto left = static_cast<size_t>(m); left > 0;) {
            const size_t take = std::min(left, iov[first].iov_len);
            iov[first].iov_base = static_cast<unsigned char*>(iov[first].iov_base) + take;
            iov[first].iov_len -= take;
            left -= take;
            if (iov[first].iov_len == 0) ++first;
        }
    }
    return got;
}

void throw_source_shrank(const SourceFile& f, uint64_t file_offset, uint64_t expected, uint64_t got) {
    throw Error(ErrorCode::source, "source '" + f.path + "' shrank while being sent: expected " + std::to_string(expected) +
                                       " bytes at offset " + std::to_string(file_offset) + ", got " + std::to_string(got) +
                                       "; run the transfer again once nothing truncates it");
}

UniqueFd SourceReader::open_checked(const SourceFile& f) {
    // A caller's fd is reopened (following the /proc magic link is the point), never dup'ed:
    // paths change file status flags (O_DIRECT) on the fd they read from. A path inside a tree
    // is opened with O_NOFOLLOW (a file replaced by a symlink since the walk is not followed);
    // a command-line operand that is a symlink was followed on purpose (the user named it).
    const int nofollow = f.is_operand() ? 0 : O_NOFOLLOW;
    UniqueFd fd(f.fd >= 0 ? ::open(("/proc/self/fd/" + std::to_string(f.fd)).c_str(), O_RDONLY | O_CLOEXEC)
                          : ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | nofollow));
    if (!fd) throw_errno(ErrorCode::source, "cannot open source '" + f.path + "'");
    check_identity(fd.get(), f, "after it was listed");
    return fd;
}

void SourceReader::check_unchanged(int fd, const SourceFile& f) { check_identity(fd, f, "while it was being sent"); }

SourceReader::~SourceReader() {
    if (current_) current_->let_go();
}

int SourceReader::open(const SourceFile& f) {
    if (current_ == &f) return fd_.get();
    check_unchanged();
    if (current_) current_->let_go();
    current_ = nullptr;
    fd_ = open_checked(f);
    f.hold(); // the caller's segment holds f until this returns
    current_ = &f;
    return fd_.get();
}

void SourceReader::check_unchanged() {
    if (current_) check_identity(fd_.get(), *current_, "while it was being sent");
}

void SourceReader::read_whole(const SourceFile& f, unsigned char* out) {
    const int fd = open(f);
    const size_t got = pread_full(fd, f, out, static_cast<size_t>(f.size), f.file_offset(0));
    if (got < f.size) throw_source_shrank(f, f.file_offset(0), f.size, got);
    check_unchanged();
}

uint64_t SourceReader::checksum(const SourceFile& f, uint64_t offset, uint64_t length) {
    // A block after the file's first was opened for: check the file has not changed since.
    if (current_ == &f) check_unchanged();
    const int fd = open(f);
    if (!buf_) buf_ = std::make_unique_for_overwrite<unsigned char[]>(kBufferBytes);
    hash_.reset();
    uint64_t done = 0;
    while (done < length) {
        const size_t want = static_cast<size_t>(std::min<uint64_t>(kBufferBytes, length - done));
        const size_t got = pread_full(fd, f, buf_.get(), want, f.file_offset(offset + done));
        hash_.update(buf_.get(), got);
        done += got;
        if (got < want) throw_source_shrank(f, f.file_offset(offset), length, done);
    }
    return hash_.digest();
}

} // namespace sluice
