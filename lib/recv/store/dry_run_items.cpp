#include "recv/store/dry_run_items.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>

#include <utility>

namespace sluice {

namespace {

using Item = wire::DryRunItem;
using K = wire::EntryKind;

int64_t mtime_ns(const struct stat& st) {
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Whether what DIR has under the name is of the entry's kind (else the entry replaces it: new).
bool same_kind(K k, const struct stat& st, const wire::EntryMeta* m) {
    switch (k) {
    case K::file:
    case K::hard_link: return S_ISREG(st.st_mode);
    case K::directory: return S_ISDIR(st.st_mode);
    case K::symlink: return S_ISLNK(st.st_mode);
    case K::fifo: return S_ISFIFO(st.st_mode);
    case K::socket: return S_ISSOCK(st.st_mode);
    case K::char_device: return S_ISCHR(st.st_mode) && (!m || st.st_rdev == m->rdev);
    case K::block_device: return S_ISBLK(st.st_mode) && (!m || st.st_rdev == m->rdev);
    case K::pipe: return false;
    }
    return false;
}

} // namespace

DryRunItems::DryRunItems(const DestTree& tree, TreeMeta& ids) : tree_(tree), ids_(ids), root_(::geteuid() == 0) {}

int DryRunItems::parent_fd(const std::string& rel) {
    if (rel != parent_rel_) {
        parent_ = tree_.find_dir(rel);
        parent_rel_ = rel;
    }
    return parent_ ? parent_.get() : -1;
}

void DryRunItems::add(const RecvFile& f, const wire::EntryMeta* m) {
    const uint16_t c = changes_of(f, m);
    if (c == 0) return;
    if (f.entry.kind == K::file && (c & (Item::kNew | Item::kSize | Item::kTime))) written_.insert(f.entry.file_id);
    page_.push_back(Item{.file_id = f.entry.file_id, .changes = c});
}

uint16_t DryRunItems::changes_of(const RecvFile& f, const wire::EntryMeta* m) {
    const wire::ManifestEntry& e = f.entry;
    // From the path: a file marked complete has let go of its parent and name (FileTable::release).
    const std::string name = DestTree::name_of(e.path);
    const int dir = parent_fd(DestTree::parent_of(e.path));
    struct stat st {};
    if (dir < 0 || ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !same_kind(e.kind, st, m))
        return Item::kNew;
    switch (e.kind) {
    case K::file: {
        uint16_t c = 0;
        if (static_cast<uint64_t>(st.st_size) != e.size) c |= Item::kSize;
        if (mtime_ns(st) != e.mtime_ns) c |= Item::kTime;
        return c | meta_changes(e, m, st) | xattr_changes(dir, name, m);
    }
    case K::hard_link: {
        // Made again when its target is written (a new inode); otherwise it must already be
        // the target's inode.
        if (m && written_.contains(m->rdev)) return Item::kNew;
        struct stat t {};
        const int tdir = parent_fd(DestTree::parent_of(e.link_target));
        if (tdir < 0 || ::fstatat(tdir, DestTree::name_of(e.link_target).c_str(), &t, AT_SYMLINK_NOFOLLOW) != 0 ||
            t.st_ino != st.st_ino || t.st_dev != st.st_dev)
            return Item::kNew;
        return 0;
    }
    case K::symlink: {
        uint16_t c = 0;
        std::string target(e.link_target.size() + 1, '\0');
        const ssize_t n = ::readlinkat(dir, name.c_str(), target.data(), target.size());
        if (n < 0 || static_cast<size_t>(n) != e.link_target.size() || target.compare(0, e.link_target.size(), e.link_target))
            c |= Item::kContent;
        if (mtime_ns(st) != e.mtime_ns) c |= Item::kTime;
        return c | xattr_changes(dir, name, m);
    }
    case K::directory: {
        uint16_t c = 0;
        if (mtime_ns(st) != e.mtime_ns) c |= Item::kTime;
        if ((st.st_mode & 0777) != (e.mode & 0777)) c |= Item::kPerms; // set-id bits are dropped for directories
        return c | owner_changes(m, st) | xattr_changes(dir, name, m);
    }
    default: return meta_changes(e, m, st) | xattr_changes(dir, name, m); // specials of the same kind (and device number)
    }
}

uint16_t DryRunItems::meta_changes(const wire::ManifestEntry& e, const wire::EntryMeta* m, const struct stat& st) {
    uint16_t c = 0;
    const uint8_t has = m ? m->flags : 0;
    // What the receiver sets: set-id bits only where it keeps both owner and group (tree_apply.cpp).
    const bool both = root_ && (has & wire::EntryMeta::kHasOwner) && (has & wire::EntryMeta::kHasGroup);
    // Without a trailer the finisher sets the permission bits only (file_finisher.cpp); from a
    // sender below full trust, no set-id bits and sticky only on directories (tree_trust.cpp).
    const mode_t mask = ids_.trust() != SenderTrust::full ? 0777 : both ? 07777 : m ? 01777 : 0777;
    if ((st.st_mode & mask) != (e.mode & mask)) c |= Item::kPerms;
    return c | owner_changes(m, st);
}

uint16_t DryRunItems::owner_changes(const wire::EntryMeta* m, const struct stat& st) {
    uint16_t c = 0;
    const uint8_t has = m ? m->flags : 0;
    if (root_ && (has & wire::EntryMeta::kHasOwner) && ids_.map_user(m->user, m->uid) != st.st_uid) c |= Item::kOwner;
    if (root_ && (has & wire::EntryMeta::kHasGroup) && ids_.map_group(m->group, m->gid) != st.st_gid) c |= Item::kGroup;
    return c;
}

// Each attribute the sender sends is compared with the one under the name (lgetxattr through
// the parent's handle: the entry itself, never what a symlink points at). Attributes only the
// receiver has count where the sender's lists are complete (exact lists: the real run removes
// them, tree_apply.cpp), and not otherwise: a transfer leaves them (docs/guarantees.md).
uint16_t DryRunItems::xattr_changes(int dir, const std::string& name, const wire::EntryMeta* m) {
    if (!m) return 0;
    const std::string at = "/proc/self/fd/" + std::to_string(dir) + "/" + name;
    uint16_t c = 0;
    // The same list the real run takes (listxattrat beside the name, not following a symlink);
    // one it cannot read is warned about then, and changes nothing here.
    if (ids_.exact() && ids_.stale().find(dir, name.c_str(), at, false, m->xattrs, stale_))
        for (const std::string& key : stale_) c |= key.starts_with("system.posix_acl_") ? Item::kAcl : Item::kXattrs;
    for (const auto& [key, value] : m->xattrs) {
        const uint16_t bit = key.starts_with("system.posix_acl_") ? Item::kAcl : Item::kXattrs;
        if (c & bit) continue;
        value_.resize(value.size() + 1); // one byte more: a longer value reads as different
        const ssize_t n = ::lgetxattr(at.c_str(), key.c_str(), value_.data(), value_.size());
        if (n < 0 || static_cast<size_t>(n) != value.size() || std::memcmp(value_.data(), value.data(), value.size()) != 0)
            c |= bit;
    }
    return c;
}

} // namespace sluice
