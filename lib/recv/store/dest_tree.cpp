#include "recv/store/dest_tree.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xxhash.h>


#include "core/io/sys_error.hpp"
#include "core/wire/protocol.hpp"
#include "recv/store/dir_replacer.hpp"

namespace sluice {

namespace {

int openat2_beneath(int dirfd, const std::string& rel, uint64_t flags) {
    open_how how{};
    how.flags = flags | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    return static_cast<int>(::syscall(SYS_openat2, dirfd, rel.empty() ? "." : rel.c_str(), &how, sizeof how));
}

} // namespace

DestTree::DestTree(const std::filesystem::path& dir) : display_(dir.string()) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) throw_errno(ErrorCode::destination, "destination '" + display_ + "'");
    if (!S_ISDIR(st.st_mode)) throw Error(ErrorCode::destination, "destination '" + display_ + "' is not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        throw_errno(ErrorCode::destination, "destination '" + display_ + "' is not writable");
    root_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root_) throw_errno(ErrorCode::destination, "cannot open destination '" + display_ + "'");
    // Marks DIR as being received into for as long as this receiver lives: a sender on this
    // host walking a tree that contains DIR sees the lock and skips DIR instead of sending
    // back what it is receiving (send/plan/source_tree.cpp, is_receiving_dir). Best effort:
    // a second receiver into the same DIR, or a file system without flock, goes unmarked.
    (void)::flock(root_.get(), LOCK_EX | LOCK_NB);
}

UniqueFd DestTree::open_dir(const std::string& rel_dir) const {
    int fd = openat2_beneath(root_.get(), rel_dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        if (errno == EXDEV || errno == ELOOP)
            throw Error(ErrorCode::destination, "refusing '" + rel_dir + "' in '" + display_ +
                                                    "': its path goes through a symlink or out of the destination");
        throw_errno(ErrorCode::destination, "cannot open directory '" + rel_dir + "' in '" + display_ + "'");
    }
    return UniqueFd(fd);
}

UniqueFd DestTree::find_dir(const std::string& rel_dir) const {
    int fd = openat2_beneath(root_.get(), rel_dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) return UniqueFd();
    if (fd < 0) return open_dir(rel_dir); // the same refusal, with its reason
    return UniqueFd(fd);
}

void DestTree::make_dirs(const std::string& rel_dir) const {
    if (rel_dir.empty()) return;
    // Fast path: it exists already (the manifest lists parents first, so this is common).
    int fd = openat2_beneath(root_.get(), rel_dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        ::close(fd);
        return;
    }
    std::string parent = parent_of(rel_dir);
    make_dirs(parent);
    UniqueFd pfd = open_dir(parent);
    if (::mkdirat(pfd.get(), name_of(rel_dir).c_str(), 0755) != 0 && errno != EEXIST)
        throw_errno(ErrorCode::destination, "cannot create directory '" + rel_dir + "' in '" + display_ + "'");
    open_dir(rel_dir); // an existing non-directory or symlink in the way is refused here
}

void DestTree::make_dir_entry(const std::string& rel_dir) const {
    if (rel_dir.empty()) return;
    UniqueFd fd(openat2_beneath(root_.get(), rel_dir, O_RDONLY | O_DIRECTORY));
    if (fd) {
        // An earlier run left it with the sender's mode, which may lack u+w or u+x (a
        // read-only directory): a receiver that is not root could then not put this run's
        // entries in it. As rsync does, u+rwx is added now; apply_dir_metadata sets the
        // sender's mode once the directory is filled. Not ours to change: creating fails
        // later, naming the entry.
        struct stat st {};
        if (::geteuid() != 0 && ::fstat(fd.get(), &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
            (void)::fchmod(fd.get(), (st.st_mode & 07777) | S_IRWXU);
        return;
    }
    if (errno == ENOTDIR || errno == ELOOP) {
        const std::string parent = parent_of(rel_dir);
        make_dirs(parent);
        UniqueFd pfd = open_dir(parent); // a symlink or file among the parents is refused here
        const std::string name = name_of(rel_dir);
        struct stat st {};
        if (::fstatat(pfd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
            ::unlinkat(pfd.get(), name.c_str(), 0) != 0)
            throw_errno(ErrorCode::destination, "cannot replace '" + rel_dir + "' in '" + display_ +
                                                    "' with the directory the source has there");
    }
    make_dirs(rel_dir);
}

Error dir_in_the_way(const std::string& path, const std::string& what) {
    return Error(ErrorCode::destination, "cannot put " + what + " '" + path +
                                             "' in place: the receiver has a directory there that is not empty (the "
                                             "source has a " + what + " there now; remove the directory first)");
}

void put_in_place(int dir, const std::string& temp, const std::string& name, const std::string& path,
                  const std::string& what, DirReplacer* replacer) {
    if (::renameat(dir, temp.c_str(), dir, name.c_str()) == 0) return;
    int err = errno;
    // rename() over a directory: EISDIR for a non-directory, ENOTEMPTY/EEXIST never reached
    // here (we never rename a directory). An empty one goes; its rmdir failing says why not.
    if (err == EISDIR) {
        if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0) {
            if (::renameat(dir, temp.c_str(), dir, name.c_str()) == 0) return;
            err = errno;
        } else if ((errno == ENOTEMPTY || errno == EEXIST) && replacer) {
            return replacer->replace(dir, temp, name, path, what);
        } else if (errno == ENOTEMPTY || errno == EEXIST) {
            ::unlinkat(dir, temp.c_str(), 0);
            throw dir_in_the_way(path, what);
        } else {
            err = errno;
        }
    }
    ::unlinkat(dir, temp.c_str(), 0);
    throw_errno(ErrorCode::destination, "cannot put " + what + " '" + path + "' in place", err);
}

std::string DestTree::parent_of(const std::string& rel) {
    size_t slash = rel.rfind('/');
    return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

std::string DestTree::name_of(const std::string& rel) {
    size_t slash = rel.rfind('/');
    return slash == std::string::npos ? rel : rel.substr(slash + 1);
}

// ".sluice-part." and the path's XXH3 in 16 hex digits; by hand, not snprintf: every entry of
// a manifest gets one (a no-change update of 100k files spent 1% of its CPU formatting them).
std::string DestTree::temp_name(const std::string& rel) {
    static_assert(wire::kTempNamePrefix == ".sluice-part.");
    std::string name(wire::kTempNamePrefix.size() + 16, '0');
    wire::kTempNamePrefix.copy(name.data(), wire::kTempNamePrefix.size());
    uint64_t h = XXH3_64bits(rel.data(), rel.size());
    for (size_t i = name.size(); h; h >>= 4) name[--i] = "0123456789abcdef"[h & 15];
    return name;
}

} // namespace sluice
