// Tree metadata applied at the end of a transfer (tree_meta.hpp): hard links and special files
// are created beside the files (temporary name, then renamed into place, as symlinks are), and
// owners, attributes and modes are set once everything is in place, through an O_PATH handle
// of the entry opened without following a symlink, inside the confined tree.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/io/file_times.hpp"
#include "core/io/sys_error.hpp"
#include "recv/store/tree_meta.hpp"

namespace sluice {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

mode_t type_bits(wire::EntryKind k) {
    switch (k) {
    case wire::EntryKind::fifo: return S_IFIFO;
    case wire::EntryKind::socket: return S_IFSOCK;
    case wire::EntryKind::char_device: return S_IFCHR;
    case wire::EntryKind::block_device: return S_IFBLK;
    default: return 0;
    }
}

// Puts what was made under f's temporary name into place (over an older entry of that name).
void rename_into_place(int dir, const RecvFile& f, const char* what, DirReplacer* replacer) {
    put_in_place(dir, f.temp, f.name, f.entry.path, what, replacer);
    // rename() of two names of one inode does nothing: a re-run's link is already there.
    ::unlinkat(dir, f.temp.c_str(), 0);
}

// The target of a hard link whose entry the table released: it must still be a regular file
// (the entry said so when it was complete), not whatever took its name since.
void require_regular_file(int dir, const std::string& name, const std::string& link) {
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        throw Error(ErrorCode::protocol, "MANIFEST: hard link '" + link + "' does not name a regular file sent earlier in this transfer");
}

} // namespace

void TreeMeta::make_links_and_specials(const DestTree& tree, FileTable& files, const std::function<void()>& still_working) {
    for (uint64_t id : links_) {
        still_working();
        const RecvFile& l = files.at(id);
        const uint64_t target = meta_.at(id).rdev;
        // The target is a file in place: its parent and name were freed (FileTable::release),
        // so both come from its path; a released target's path is the one the link names.
        const std::string& path = files.released(target) ? l.entry.link_target : files.at(target).entry.path;
        UniqueFd from = tree.open_dir(DestTree::parent_of(path));
        if (files.released(target)) require_regular_file(from.get(), DestTree::name_of(path), l.entry.path);
        UniqueFd dir = tree.open_dir(l.parent);
        ::unlinkat(dir.get(), l.temp.c_str(), 0); // one an earlier run left; usually none
        if (::linkat(from.get(), DestTree::name_of(path).c_str(), dir.get(), l.temp.c_str(), 0) != 0)
            throw_errno(ErrorCode::destination, "cannot create hard link '" + l.entry.path + "' to '" + path + "'");
        rename_into_place(dir.get(), l, "hard link", files.dir_replacer());
    }
    for (uint64_t id : specials_) {
        still_working();
        const RecvFile& s = files.at(id);
        auto m = meta_.find(id);
        const dev_t rdev = m == meta_.end() ? 0 : static_cast<dev_t>(m->second.rdev);
        UniqueFd dir = tree.open_dir(s.parent);
        ::unlinkat(dir.get(), s.temp.c_str(), 0);
        if (::mknodat(dir.get(), s.temp.c_str(), type_bits(s.entry.kind) | (s.entry.mode & 0777), rdev) != 0) {
            const int err = errno;
            if (err != EPERM && err != EACCES && err != EOPNOTSUPP)
                throw_errno(ErrorCode::destination, "cannot create '" + s.entry.path + "'", err);
            const bool device = s.entry.kind == wire::EntryKind::char_device || s.entry.kind == wire::EntryKind::block_device;
            warnings_.add(device ? "devices (not created)" : "special files (not created)", s.entry.path,
                          errno_text(err) + (device ? "; making devices needs CAP_MKNOD" : ""));
            not_created_.push_back(id);
            continue;
        }
        if (::utimensat(dir.get(), s.temp.c_str(), FileTimes(s.entry.mtime_ns).t, AT_SYMLINK_NOFOLLOW) != 0)
            throw_errno(ErrorCode::destination, "cannot set the mtime of '" + s.entry.path + "'");
        rename_into_place(dir.get(), s, "special file", files.dir_replacer());
    }
}

void TreeMeta::apply(const DestTree& tree, FileTable& files, const std::function<void()>& still_working) {
    std::sort(not_created_.begin(), not_created_.end());
    for (const auto& [id, m] : meta_) {
        // A directory or symlink whose slab the table released: from the copy take_released kept.
        auto kept = released_.find(id);
        const RecvFile* f = kept == released_.end() ? &files.at(id) : nullptr;
        const wire::ManifestEntry& e = f ? f->entry : kept->second;
        if (e.kind == wire::EntryKind::hard_link || e.kind == wire::EntryKind::pipe) continue;
        if (std::binary_search(not_created_.begin(), not_created_.end(), m.id)) continue;
        still_working();
        apply_one(tree, e, m);
    }
}

void TreeMeta::apply_one(const DestTree& tree, const wire::ManifestEntry& e, const Stored& m) {
    const std::string& path = e.path;
    // From the path: a file in place has given back its parent and name (FileTable::release).
    UniqueFd dir = tree.open_dir(DestTree::parent_of(path));
    UniqueFd fd(::openat(dir.get(), DestTree::name_of(path).c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throw_errno(ErrorCode::destination, "cannot open '" + path + "' to set its owner and attributes");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_errno(ErrorCode::destination, "cannot stat '" + path + "'");
    const bool link = S_ISLNK(st.st_mode);

    // Owner first: chown clears set-id bits and file capabilities, which come after it.
    bool owner_kept = true;
    const uid_t uid = (m.flags & wire::EntryMeta::kHasOwner) && m.uid != st.st_uid ? m.uid : static_cast<uid_t>(-1);
    const gid_t gid = (m.flags & wire::EntryMeta::kHasGroup) && m.gid != st.st_gid ? m.gid : static_cast<gid_t>(-1);
    if ((uid != static_cast<uid_t>(-1) || gid != static_cast<gid_t>(-1)) &&
        ::fchownat(fd.get(), "", uid, gid, AT_EMPTY_PATH) != 0) {
        const int err = errno;
        if (err != EPERM && err != EINVAL)
            throw_errno(ErrorCode::destination, "cannot set the owner of '" + path + "'", err);
        owner_kept = false;
        warnings_.add("owners", path, errno_text(err) + (err == EPERM ? " (changing owners needs root or CAP_CHOWN)" : ""));
    }
    const std::string proc = "/proc/self/fd/" + std::to_string(fd.get());
    // A symlink's attributes (trusted., security.; the kernel refuses user. ones on symlinks)
    // cannot be set through its O_PATH handle, which setxattr follows: lsetxattr names it in
    // its directory's handle instead (opened beneath DIR), and does not follow it.
    const std::string link_path =
        link ? "/proc/self/fd/" + std::to_string(dir.get()) + "/" + DestTree::name_of(path) : std::string();
    const bool removed = stale_.on() && remove_stale(dir.get(), link ? link_path : proc, !link, path, m);
    for (const auto& [name, value] : m.xattrs) {
        const int rc = link ? ::lsetxattr(link_path.c_str(), name.c_str(), value.data(), value.size(), 0)
                            : ::setxattr(proc.c_str(), name.c_str(), value.data(), value.size(), 0);
        if (rc != 0) warnings_.add(link ? "attributes of symlinks" : xattr_kind(name), path, errno_text(errno));
    }
    if (link) return;
    // Set-id bits only where the owner and group are the sender's (a transfer must not mint a
    // setuid file of the receiver's user) and the sender is fully trusted (sender_trust).
    const mode_t mode = mode_to_set(e, m, owner_kept);
    warn_mode_bits(e, mode);
    // Setting an access ACL rewrites the group bits (its mask): the mode goes last.
    if (((st.st_mode & 07777) != mode || !m.xattrs.empty() || removed) && ::chmod(proc.c_str(), mode) != 0)
        throw_errno(ErrorCode::destination, "cannot set the mode of '" + path + "'");
}

bool TreeMeta::remove_stale(int dir, const std::string& at, bool follow, const std::string& path, const Stored& m) {
    if (!stale_.find(dir, DestTree::name_of(path).c_str(), at, follow, m.xattrs, stale_names_)) {
        warnings_.add("removed attributes (not mirrored)", path, "cannot list its attributes: " + errno_text(errno));
        return false;
    }
    bool removed = false;
    for (const std::string& name : stale_names_) {
        const int rc = follow ? ::removexattr(at.c_str(), name.c_str()) : ::lremovexattr(at.c_str(), name.c_str());
        if (rc == 0 || errno == ENODATA) { // ENODATA: gone since the list; what was asked holds
            removed = true;
            continue;
        }
        warnings_.add("removal of " + xattr_kind(name), path, errno_text(errno));
    }
    return removed;
}

} // namespace sluice
