#include "send/plan/tree_reader.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string_view>
#include <vector>

#include "core/io/sys_error.hpp"
#include "core/session/chown_spec.hpp"
#include "core/io/xattr_list.hpp"
#include "send/plan/owner_names.hpp"

namespace sluice {

namespace {

bool wanted(std::string_view name, const TreeOptions& o) {
    const bool acl = name == "system.posix_acl_access" || name == "system.posix_acl_default";
    if (acl) return o.acls;
    if (name.starts_with("user.") || name.starts_with("trusted.") || name.starts_with("security.")) return o.xattrs;
    return false; // other system.* attributes (NFSv4 ACLs, ...) have no portable meaning
}

// Grows the buffer until the kernel's answer fits (a concurrent change may grow it between calls).
template <class Fn>
ssize_t sized_call(std::vector<char>& buf, Fn fn) {
    for (;;) {
        ssize_t n = fn(buf.data(), buf.size());
        if (n >= 0 || errno != ERANGE) return n;
        ssize_t need = fn(nullptr, 0);
        if (need < 0) return need;
        buf.resize(static_cast<size_t>(need) + 1);
    }
}

ssize_t list_names(const std::string& path, EntryAt at, char* b, size_t s) {
    return list_xattr_names(at.dir, at.name, path.c_str(), b, s);
}

void read_xattrs(const std::string& path, EntryAt at, const TreeOptions& o, wire::EntryMeta& m) {
    // Kept between files (one walk per thread): a tree's walk lists every file's attributes.
    thread_local std::vector<char> names(4096), value(4096);
    ssize_t n = sized_call(names, [&](char* b, size_t s) { return list_names(path, at, b, s); });
    if (n < 0) {
        if (errno == ENOTSUP || errno == ENODATA) return;
        throw_errno(ErrorCode::source, "cannot list the extended attributes of '" + path + "'");
    }
    for (size_t at = 0; at < static_cast<size_t>(n);) {
        std::string_view name(names.data() + at);
        at += name.size() + 1;
        if (name.empty() || !wanted(name, o)) continue;
        const std::string key(name);
        ssize_t v = sized_call(value, [&](char* b, size_t s) { return ::lgetxattr(path.c_str(), key.c_str(), b, s); });
        if (v < 0 && errno == ENODATA) continue; // removed since it was listed
        if (v < 0) throw_errno(ErrorCode::source, "cannot read attribute '" + key + "' of '" + path + "'");
        m.xattrs.emplace_back(key, std::string(value.data(), static_cast<size_t>(v)));
    }
}

} // namespace

TreeOptions tree_options_of(const SendOptions& o) {
    TreeOptions t;
    t.hard_links = o.hard_links;
    t.owner = o.owner;
    t.group = o.group;
    t.xattrs = o.xattrs;
    t.acls = o.acls;
    t.specials = o.specials;
    for (const std::string& r : o.filters) t.filters.add_rule(r);
    t.usermap = o.usermap;
    t.groupmap = o.groupmap;
    if (!o.chown.empty()) {
        // rsync's --chown: the maps '*:USER' / '*:GROUP', and -o / -g for the parts given.
        const ChownMaps maps = chown_maps(o.chown, o.usermap, o.groupmap);
        t.user_chown = maps.usermap != o.usermap;
        t.group_chown = maps.groupmap != o.groupmap;
        t.owner = t.owner || t.user_chown;
        t.group = t.group || t.group_chown;
        t.usermap = maps.usermap;
        t.groupmap = maps.groupmap;
    }
    return t;
}

std::optional<wire::EntryMeta> read_entry_meta(const std::string& path, const struct stat& st, const TreeOptions& opts,
                                               EntryAt at) {
    if (!opts.any_meta()) return std::nullopt;
    wire::EntryMeta m;
    if (opts.owner) {
        m.flags |= wire::EntryMeta::kHasOwner;
        m.uid = st.st_uid;
        if (st.st_uid != 0) m.user = owner_name(false, st.st_uid); // 0 is never mapped by name (rsync's rule)
    }
    if (opts.group) {
        m.flags |= wire::EntryMeta::kHasGroup;
        m.gid = st.st_gid;
        if (st.st_gid != 0) m.group = owner_name(true, st.st_gid);
    }
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) m.rdev = st.st_rdev;
    if (opts.xattrs || opts.acls) read_xattrs(path, at, opts, m);
    return m;
}

const HardLinkTracker::First* HardLinkTracker::seen(const struct stat& st, uint64_t file_id, const std::string& rel) {
    auto [it, inserted] = first_.try_emplace({st.st_dev, st.st_ino}, First{file_id, rel});
    return inserted ? nullptr : &it->second;
}

} // namespace sluice
