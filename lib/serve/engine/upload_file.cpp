#include "serve/engine/upload_file.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::serve {

namespace {

constexpr uint64_t kPreallocateFrom = 1 << 20; // smaller bodies: one call less matters more
constexpr unsigned kMaxNewDirs = 32;           // directories one upload may create

int status_of(int err) {
    switch (err) {
    case ENOENT: return 404;
    case ENOSPC:
    case EDQUOT: return 507;
    case EISDIR:
    case ENOTEMPTY:
    case EEXIST: return 409;
    case EXDEV: // RESOLVE_BENEATH: out of DIR
    case ELOOP: // a symlink (RESOLVE_NO_SYMLINKS, O_NOFOLLOW)
    case ENOTDIR:
    case EACCES:
    case EPERM:
    case EROFS: return 403;
    default: return 500;
    }
}

int open_dir_beneath(int root, const std::string& rel) {
    open_how how{};
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    int fd;
    do {
        fd = static_cast<int>(::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how));
    } while (fd < 0 && errno == EINTR);
    return fd;
}

bool fsync_retry(int fd) {
    int r;
    do {
        r = ::fsync(fd);
    } while (r != 0 && errno == EINTR);
    return r == 0;
}

} // namespace

std::unique_ptr<UploadFile> UploadFile::open(int root_fd, const std::string& rel, uint64_t length, unsigned thread,
                                             std::atomic<unsigned>* open_count, int* status) {
    *status = 0;
    std::unique_ptr<UploadFile> u(new UploadFile());
    u->root_ = root_fd;
    const size_t slash = rel.rfind('/');
    const std::string parent = slash == std::string::npos ? std::string() : rel.substr(0, slash);
    u->leaf_ = slash == std::string::npos ? rel : rel.substr(slash + 1);
    if (u->leaf_.empty() || u->leaf_.rfind(kUploadTempPrefix, 0) == 0) {
        *status = 403;
        return nullptr;
    }
    if (!parent.empty()) {
        int fd = open_dir_beneath(root_fd, parent);
        if (fd >= 0) {
            u->parent_.reset(fd);
        } else if (errno != ENOENT) {
            *status = status_of(errno);
            return nullptr;
        } else {
            // Some directory is missing: walk one component at a time, making what is missing.
            // O_NOFOLLOW on each: a symlink planted on the way is refused, never followed.
            UniqueFd cur;
            unsigned made = 0;
            for (size_t pos = 0; pos <= parent.size();) {
                size_t end = parent.find('/', pos);
                if (end == std::string::npos) end = parent.size();
                const std::string comp = parent.substr(pos, end - pos);
                pos = end + 1;
                const int at = cur ? cur.get() : root_fd;
                int d = ::openat(at, comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (d < 0 && errno == ENOENT) {
                    if (++made > kMaxNewDirs) {
                        *status = 403;
                        return nullptr;
                    }
                    if (::mkdirat(at, comp.c_str(), 0755) != 0 && errno != EEXIST) {
                        *status = status_of(errno);
                        return nullptr;
                    }
                    // The directory that got a new entry: made durable with the file (--sync).
                    int keep = ::fcntl(at, F_DUPFD_CLOEXEC, 0);
                    if (keep >= 0) u->made_dirs_parents_.emplace_back(keep);
                    d = ::openat(at, comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (d < 0) {
                    *status = status_of(errno == ELOOP ? ELOOP : errno);
                    return nullptr;
                }
                cur.reset(d);
            }
            u->parent_ = std::move(cur);
        }
    }
    static std::atomic<uint64_t> serial{0};
    char name[96];
    for (int attempt = 0; attempt < 4 && !u->file_; ++attempt) {
        std::snprintf(name, sizeof name, "%s%d.%u.%llu", kUploadTempPrefix, static_cast<int>(::getpid()), thread,
                      static_cast<unsigned long long>(serial.fetch_add(1, std::memory_order_relaxed)));
        int fd = ::openat(u->dir(), name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            u->file_.reset(fd);
            u->temp_ = name;
        } else if (errno != EEXIST) {
            *status = status_of(errno);
            return nullptr;
        }
    }
    if (!u->file_) {
        *status = 500;
        return nullptr;
    }
    // From here the destructor removes the temporary file and counts the upload as ended.
    u->open_count_ = open_count;
    if (open_count) open_count->fetch_add(1, std::memory_order_relaxed);
    if (length >= kPreallocateFrom && ::fallocate(u->file_.get(), 0, 0, static_cast<off_t>(length)) != 0 &&
        (errno == ENOSPC || errno == EDQUOT)) {
        *status = 507; // refused before the client sends what cannot be stored
        return nullptr;
    }
    u->left = length;
    return u;
}

UploadFile::~UploadFile() {
    if (!committed_ && !temp_.empty()) ::unlinkat(dir(), temp_.c_str(), 0);
    if (open_count_) open_count_->fetch_sub(1, std::memory_order_relaxed);
}

int UploadFile::write(const char* data, size_t len) {
    while (len > 0) {
        ssize_t n = ::write(file_.get(), data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return status_of(n < 0 ? errno : ENOSPC);
        data += n;
        len -= static_cast<size_t>(n);
        received += static_cast<uint64_t>(n);
    }
    return 0;
}

int UploadFile::commit(bool durable) {
    if (durable && !fsync_retry(file_.get())) return status_of(errno);
    // RENAME_NOREPLACE first tells a new name (201) from a replaced one (200) in one call.
    if (::renameat2(dir(), temp_.c_str(), dir(), leaf_.c_str(), RENAME_NOREPLACE) == 0) {
        created = true;
    } else if (errno == EEXIST) {
        if (::renameat(dir(), temp_.c_str(), dir(), leaf_.c_str()) != 0) return status_of(errno);
    } else {
        return status_of(errno);
    }
    committed_ = true;
    file_.reset();
    if (durable) {
        if (!fsync_retry(dir())) return status_of(errno);
        for (const UniqueFd& d : made_dirs_parents_)
            if (!fsync_retry(d.get())) return status_of(errno);
    }
    return 0;
}

} // namespace sluice::serve
