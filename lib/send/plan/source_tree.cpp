#include "send/plan/source_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <set>

#include "core/io/file_times.hpp"
#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"

namespace sluice {

namespace {

// The mtime of a listed entry. A time an int64 of nanoseconds cannot hold (before 1677 or
// after 2262) cannot be carried by the manifest: refused naming the file, never wrapped.
int64_t mtime_ns_of(const struct stat& st, const std::string& path) {
    if (auto ns = ns_of_checked(st.st_mtim)) return *ns;
    throw Error(ErrorCode::source, "source '" + path + "' has an mtime (" + std::to_string(st.st_mtim.tv_sec) +
                                       " s since 1970) outside the years 1677-2262 that sluice can carry; set it "
                                       "(touch -m) and send again");
}

const char* special_kind(mode_t m) {
    if (S_ISFIFO(m)) return "fifo";
    if (S_ISSOCK(m)) return "socket";
    if (S_ISCHR(m)) return "character device";
    if (S_ISBLK(m)) return "block device";
    return "special file";
}

std::string read_link(const std::string& path, size_t size_hint) {
    std::string target(std::max<size_t>(size_hint, 64) + 1, '\0');
    ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n < 0) throw_errno(ErrorCode::source, "cannot read symlink '" + path + "'");
    if (static_cast<size_t>(n) >= target.size()) return read_link(path, target.size() * 2);
    target.resize(static_cast<size_t>(n));
    return target;
}

// Kernel file systems whose files report a size of 0 (or a page) whatever they hold.
const char* pseudo_fs_name(const struct statfs& sf) {
    switch (static_cast<unsigned long>(sf.f_type)) {
    case PROC_SUPER_MAGIC: return "procfs";
    case SYSFS_MAGIC: return "sysfs";
    case DEBUGFS_MAGIC: return "debugfs";
    case TRACEFS_MAGIC: return "tracefs";
    case SECURITYFS_MAGIC: return "securityfs";
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC: return "cgroupfs";
    case BPF_FS_MAGIC: return "bpffs";
    case EFIVARFS_MAGIC: return "efivarfs";
    case PSTOREFS_MAGIC: return "pstore";
    case 0x62656570: return "configfs"; // CONFIGFS_MAGIC, not in every linux/magic.h
    default: return nullptr;
    }
}

[[noreturn]] void throw_pseudo_file(const std::string& path, const std::string& why) {
    throw Error(ErrorCode::source, "source '" + path + "' " + why +
                                       ": sluice sends a file's listed size, so it would arrive empty. Copy it to a "
                                       "regular file first, or send its bytes in pipe mode: sluice send - URL < '" +
                                       path + "' (into sluice recv --stdout)");
}

// The name a path given on the command line gets under the destination. From its last
// component as written (a symlink keeps its own name, as cp -L and tar -h name it), except
// that "." and ".." (and "/") say nothing about what is read: the kernel resolves ".." after
// the symlinks before it (`a/lnk/..` is the parent of lnk's target, not `a`), so those are
// named after the directory they actually resolve to.
std::string name_for(const std::string& p) {
    std::string t = p;
    while (t.size() > 1 && t.back() == '/') t.pop_back();
    const size_t slash = t.rfind('/');
    std::string last = slash == std::string::npos ? t : t.substr(slash + 1);
    if (!last.empty() && last != "." && last != "..") return last;
    char* real = ::realpath(p.c_str(), nullptr);
    if (!real) throw_errno(ErrorCode::source, "source '" + p + "'");
    std::string r = real;
    std::free(real);
    if (r == "/") return {};
    return r.substr(r.rfind('/') + 1);
}

class Walker {
public:
    explicit Walker(const WalkVisitor& visit) : visit_(visit) {}

    // A path given to send(): its symlink (if it is one) is followed; inside the tree entries
    // are taken as they are (a symlink is sent as a symlink).
    void visit_root(const std::string& src, const std::string& name) {
        src_ = src;
        rel_ = name;
        visit(true, {});
    }

private:
    // The entry at src_ (its path on this host) and rel_ (its path in the transfer): two
    // buffers the walk appends each name to and cuts back after it, so an entry costs no
    // temporary strings, only the copies its manifest entry and file record keep.
    void visit(bool root, EntryAt at) {
        const std::string& src = src_;
        struct stat st = {};
        const int rc = root ? ::stat(src.c_str(), &st)
                       : at.dir >= 0 ? ::fstatat(at.dir, at.name, &st, AT_SYMLINK_NOFOLLOW)
                                     : ::lstat(src.c_str(), &st);
        if (rc != 0)
            throw_errno(ErrorCode::source, "cannot stat '" + src + "'");
        // The receiver refuses a longer path as a protocol error naming only the entry's number
        // (it is bounded there, docs/protocol.md "Limits"); refused here, it is named.
        if (rel_.size() > wire::kMaxPathBytes)
            throw Error(ErrorCode::source, "cannot send '" + src + "': its path in the transfer is " +
                                               std::to_string(rel_.size()) + " bytes long, more than the " +
                                               std::to_string(wire::kMaxPathBytes) + " a path may have");
        wire::ManifestEntry e;
        e.path = rel_;
        e.mode = st.st_mode & 07777;
        if (visit_.tree && !root && tree_hook(e, src, st, at)) return;
        refuse_temp_name(src, rel_);
        if (S_ISREG(st.st_mode)) {
            e.mtime_ns = mtime_ns_of(st, src);
            if (st.st_size == 0) refuse_pseudo_file(src, root);
            e.kind = wire::EntryKind::file;
            e.size = static_cast<uint64_t>(st.st_size);
            emit_meta(src, st, at);
            emit(std::move(e), std::string(src), static_cast<uint64_t>(st.st_blocks) * 512);
        } else if (S_ISLNK(st.st_mode)) {
            e.mtime_ns = mtime_ns_of(st, src);
            e.kind = wire::EntryKind::symlink;
            e.link_target = read_link(src, static_cast<size_t>(st.st_size));
            emit_meta(src, st, at);
            emit(std::move(e), {});
        } else if (S_ISDIR(st.st_mode)) {
            const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (root ? 0 : O_NOFOLLOW);
            UniqueFd fd(at.dir >= 0 ? ::openat(at.dir, at.name, flags) : ::open(src.c_str(), flags));
            if (!fd) throw_errno(ErrorCode::source, "cannot open directory '" + src + "'");
            if (is_receiving_dir(fd.get())) {
                // The receiver of this (or another) transfer writes here right now: its temporary
                // files change under the walk and what it renames into place would be sent back
                // into itself, one level deeper each time.
                if (root)
                    throw Error(ErrorCode::source, "source '" + src +
                                                       "' is the directory a sluice receiver is receiving into; "
                                                       "send it once that transfer has ended");
                visit_.skipped("skipping '" + src + "': a sluice receiver is receiving into it");
                return;
            }
            e.mtime_ns = mtime_ns_of(st, src);
            e.kind = wire::EntryKind::directory;
            emit_meta(src, st, at);
            emit(std::move(e), {});
            // Its entries are looked up relative to it (one fd per level of depth is open).
            const size_t src_len = src_.size(), rel_len = rel_.size();
            for (const std::string& name : list_dir(fd.get(), src_)) {
                src_.append("/").append(name);
                rel_.append("/").append(name);
                visit(false, EntryAt{fd.get(), name.c_str()});
                src_.resize(src_len);
                rel_.resize(rel_len);
            }
        } else {
            visit_.skipped("skipping " + std::string(special_kind(st.st_mode)) + " '" + src + "'");
        }
    }

    // After the filters, which can leave such files out.
    static void refuse_temp_name(const std::string& src, const std::string& rel) {
        const size_t slash = rel.rfind('/');
        if (std::string_view(rel).substr(slash == std::string::npos ? 0 : slash + 1).starts_with(wire::kTempNamePrefix))
            throw Error(ErrorCode::source, "cannot send '" + src + "': its name has the form of a sluice receiver's "
                                           "temporary file (an unfinished transfer's, kept for resume), which the "
                                           "receiver takes for its own; --exclude '" + std::string(wire::kTempNamePrefix) +
                                           "*' leaves such files out");
    }

    // Issue 17's part of visit() for an entry inside a tree: filters, hard links to a file
    // already listed, special files. True if it dealt with the entry.
    bool tree_hook(wire::ManifestEntry& e, const std::string& src, const struct stat& st, EntryAt at) {
        const TreeOptions& t = *visit_.tree;
        if (!t.filters.empty() && t.filters.excluded(e.path, S_ISDIR(st.st_mode))) {
            if (visit_.excluded) visit_.excluded(e.path, S_ISDIR(st.st_mode));
            return true;
        }
        if (S_ISREG(st.st_mode) && t.hard_links && st.st_nlink > 1) {
            if (const HardLinkTracker::First* first = links_.seen(st, next_id_, e.path)) {
                refuse_temp_name(src, e.path);
                e.kind = wire::EntryKind::hard_link;
                e.link_target = first->rel;
                e.mtime_ns = mtime_ns_of(st, src);
                wire::EntryMeta m;
                m.rdev = first->file_id;
                visit_.meta(std::move(m));
                emit(std::move(e), {});
                return true;
            }
            return false;
        }
        if (!t.specials || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)) return false;
        e.kind = S_ISFIFO(st.st_mode)  ? wire::EntryKind::fifo
                 : S_ISSOCK(st.st_mode) ? wire::EntryKind::socket
                 : S_ISCHR(st.st_mode)  ? wire::EntryKind::char_device
                                        : wire::EntryKind::block_device;
        e.mtime_ns = mtime_ns_of(st, src);
        std::optional<wire::EntryMeta> m = read_entry_meta(src, st, t, at);
        if (!m) m.emplace();
        m->rdev = (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? st.st_rdev : 0;
        visit_.meta(std::move(*m));
        emit(std::move(e), {});
        return true;
    }

    void emit_meta(const std::string& src, const struct stat& st, EntryAt at) {
        if (!visit_.tree) return;
        if (std::optional<wire::EntryMeta> m = read_entry_meta(src, st, *visit_.tree, at)) visit_.meta(std::move(*m));
    }

    void emit(wire::ManifestEntry&& e, std::string&& src, uint64_t allocated = kUnknownAllocation) {
        e.file_id = next_id_++;
        visit_.entry(std::move(e), std::move(src), allocated);
    }

    // Sorted names, so that manifests (and resumes) are deterministic.
    static std::vector<std::string> list_dir(int dir_fd, const std::string& dir) {
        UniqueFd fd(::dup(dir_fd)); // closedir closes this one; dir_fd stays for the lookups
        DIR* d = fd ? ::fdopendir(fd.get()) : nullptr;
        if (!d) throw_errno(ErrorCode::source, "cannot read directory '" + dir + "'");
        fd.release();
        std::vector<std::string> names;
        errno = 0;
        while (dirent* de = ::readdir(d)) {
            std::string_view n = de->d_name;
            if (n != "." && n != "..") names.emplace_back(n);
        }
        int err = errno;
        ::closedir(d);
        if (err) throw_errno(ErrorCode::source, "cannot read directory '" + dir + "'", err);
        std::sort(names.begin(), names.end());
        return names;
    }

    const WalkVisitor& visit_;
    std::string src_, rel_;
    uint64_t next_id_ = 0;
    HardLinkTracker links_;
};

} // namespace

bool is_receiving_dir(int dir_fd) {
    // A shared lock is refused only while someone holds the exclusive one: several senders
    // walking the same tree never see each other.
    if (::flock(dir_fd, LOCK_SH | LOCK_NB) != 0) return errno == EWOULDBLOCK;
    ::flock(dir_fd, LOCK_UN);
    return false;
}

void refuse_pseudo_file(const std::string& path, bool follow) {
    struct statfs sf = {};
    if (::statfs(path.c_str(), &sf) == 0) {
        if (const char* fs = pseudo_fs_name(sf))
            throw_pseudo_file(path, std::string("is a pseudo-file (") + fs + "): its size reads 0 whatever it holds");
    }
    // Elsewhere (FUSE, network file systems) the size is believed unless a read says otherwise.
    // Non-blocking: a file that would block is not an empty regular file either.
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW)));
    if (!fd) return; // unreadable: nothing can be sent from it; it is listed as the empty file it says it is
    unsigned char byte = 0;
    ssize_t n = 0;
    do n = ::read(fd.get(), &byte, 1);
    while (n < 0 && errno == EINTR);
    if (n > 0) throw_pseudo_file(path, "reports a size of 0 but has data (a pseudo-file?)");
    if (n < 0 && errno == EAGAIN) throw_pseudo_file(path, "reports a size of 0 but would block when read");
}

std::vector<SourceRoot> check_sources(const std::vector<std::string>& paths) {
    if (paths.empty()) throw Error(ErrorCode::usage, "no source paths given");
    std::vector<SourceRoot> roots;
    std::set<std::string> names;
    for (const std::string& p : paths) {
        struct stat st = {};
        if (::stat(p.c_str(), &st) != 0) {
            const int err = errno;
            struct stat lst = {};
            if (::lstat(p.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode))
                throw_errno(ErrorCode::source, "source '" + p + "' is a symlink to '" + read_link(p, 0) + "'", err);
            throw_errno(ErrorCode::source, "source '" + p + "'", err);
        }
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
            throw Error(ErrorCode::source,
                        "source '" + p + "' is a " + (S_ISFIFO(st.st_mode) ? "pipe or fifo" : special_kind(st.st_mode)) +
                            ", not a file or directory; to send the bytes read from it, use pipe mode: sluice send - URL < '" +
                            p + "' (or producer | sluice send - URL), into sluice recv --stdout");
        if (::access(p.c_str(), R_OK | (S_ISDIR(st.st_mode) ? X_OK : 0)) != 0)
            throw_errno(ErrorCode::source, "source '" + p + "' is not readable");
        if (S_ISREG(st.st_mode) && st.st_size == 0) refuse_pseudo_file(p, true);
        if (S_ISDIR(st.st_mode)) {
            UniqueFd fd(::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
            if (fd && is_receiving_dir(fd.get()))
                throw Error(ErrorCode::source, "source '" + p +
                                                   "' is the directory a sluice receiver is receiving into; send it "
                                                   "once that transfer has ended");
        }
        std::string name = name_for(p);
        if (name.empty())
            throw Error(ErrorCode::source,
                        "source '" + p + "' has no name to use under the destination (send its contents instead)");
        if (!names.insert(name).second)
            throw Error(ErrorCode::source, "two sources would both be received as '" + name + "' (second: '" + p + "')");
        roots.push_back({p, name});
    }
    return roots;
}

void walk_sources(const std::vector<SourceRoot>& roots, const WalkVisitor& visit) {
    Walker w(visit);
    for (const auto& r : roots) w.visit_root(r.path, r.name);
}

} // namespace sluice
