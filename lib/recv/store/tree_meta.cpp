#include "recv/store/tree_meta.hpp"

#include "core/wire/acl_ids.hpp"

namespace sluice {

std::string xattr_kind(const std::string& name) {
    if (wire::is_acl_name(name)) return "ACLs";
    if (name == "security.capability") return "file capabilities";
    return name.substr(0, name.find('.') + 1) + "* extended attributes";
}

void MetaWarnings::add(const std::string& kind, const std::string& path, const std::string& why) {
    Seen& s = kinds_[kind];
    if (s.count++ == 0) {
        s.first = path;
        s.why = why;
    }
}

namespace {

std::string warning_line(const std::string& kind, uint64_t count, const std::string& first, const std::string& why) {
    return "warning: " + kind + " not kept for " + std::to_string(count) + (count == 1 ? " entry" : " entries") +
           " (first: '" + first + "': " + why + ")";
}

} // namespace

uint64_t MetaWarnings::report(SessionLog& log) const {
    uint64_t n = 0;
    for (const auto& [kind, s] : kinds_) {
        log.line(warning_line(kind, s.count, s.first, s.why));
        n += s.count;
    }
    return n;
}

std::vector<MetadataNotKept> MetaWarnings::list() const {
    std::vector<MetadataNotKept> out;
    for (const auto& [kind, s] : kinds_) out.push_back({.kind = kind, .entries = s.count, .first = s.first, .why = s.why});
    return out;
}

std::string MetaWarnings::text(size_t max_bytes) const {
    std::string out;
    size_t left = kinds_.size();
    for (const auto& [kind, s] : kinds_) {
        // Escaped here: a newline in a path must not look like the next line at the sender.
        std::string line = printable(warning_line(kind, s.count, s.first, s.why));
        // Room kept for the line that says how many were left out.
        if (out.size() + line.size() + 1 + 80 > max_bytes) break;
        out += (out.empty() ? "" : "\n") + line;
        --left;
    }
    if (left) out += (out.empty() ? "" : "\n") + std::string("warning: ") + std::to_string(left) + " more kinds not kept (the receiver's log lists them)";
    return out;
}

uint64_t MetaWarnings::count(const std::string& kind) const {
    auto it = kinds_.find(kind);
    return it == kinds_.end() ? 0 : it->second.count;
}

void TreeMeta::charge(uint64_t n, const std::string& path) {
    bytes_ += n;
    if (bytes_ > max_bytes_)
        throw Error(ErrorCode::protocol, "the metadata of the manifest needs more than " + std::to_string(max_bytes_ >> 20) +
                                             " MiB on the receiver (at '" + path + "'; --max-manifest-bytes)");
}

void TreeMeta::add_entry(const RecvFile& f) {
    using K = wire::EntryKind;
    const K k = f.entry.kind;
    if (k == K::hard_link || k == K::fifo || k == K::socket || k == K::char_device || k == K::block_device) {
        charge(sizeof(uint64_t), f.entry.path);
        (k == K::hard_link ? links_ : specials_).push_back(f.entry.file_id);
    }
}

void TreeMeta::add_meta(FileTable& files, const RecvFile& f, wire::EntryMeta&& m, const struct stat* in_place,
                        int in_place_dir) {
    if (f.entry.kind == wire::EntryKind::hard_link) {
        // The decoder saw that the id is an earlier entry's; it must also be a regular file
        // under the name the link gives (nothing outside the transfer, no later entry).
        // A target whose slab was released (issue 19) was a complete entry: the link is made to
        // the name it gives, checked to be a regular file then (make_links_and_specials).
        if (!files.released(m.rdev)) {
            const RecvFile& t = files.at(m.rdev);
            if (t.entry.kind != wire::EntryKind::file || t.entry.path != f.entry.link_target)
                throw Error(ErrorCode::protocol, "MANIFEST: hard link '" + f.entry.path + "' to '" + f.entry.link_target +
                                                     "' does not name a regular file sent earlier in this transfer");
        }
        m.flags = 0; // a link has its target's inode: owner and attributes come with the target
    }
    Stored s{.id = f.entry.file_id,
             .flags = m.flags,
             .uid = static_cast<uid_t>(-1),
             .gid = static_cast<gid_t>(-1),
             .rdev = m.rdev,
             .xattrs = std::move(m.xattrs)};
    charge(cost(s), f.entry.path);
    if (m.flags & wire::EntryMeta::kHasOwner) s.uid = map_user(m.user, m.uid);
    if (m.flags & wire::EntryMeta::kHasGroup) s.gid = map_group(m.group, m.gid);
    if (in_place && already_in_place(f.entry, s, *in_place)) {
        // Exact lists: an attribute the sender no longer has keeps the entry for apply(); so
        // does a list that cannot be read (apply() says why).
        bool stale = false;
        if (stale_.on()) {
            // By name in its directory (one component); the path, for a kernel without
            // listxattrat, reuses one buffer: no allocation per file.
            // A complete file has given back its parent and name: the last part of its path.
            const size_t slash = f.entry.path.rfind('/');
            const char* name = f.entry.path.c_str() + (slash == std::string::npos ? 0 : slash + 1);
            in_place_path_.assign("/proc/self/fd/").append(std::to_string(in_place_dir)).append("/").append(name);
            stale = !stale_.find(in_place_dir, name, in_place_path_, false, s.xattrs, stale_names_) ||
                    !stale_names_.empty();
        }
        if (!stale) {
            bytes_ -= cost(s);
            return;
        }
    }
    meta_.emplace(s.id, std::move(s));
}

bool TreeMeta::already_in_place(const wire::ManifestEntry& e, const Stored& m, const struct stat& st) const {
    if (!m.xattrs.empty()) return false; // setting them again is cheaper than reading them to compare
    if ((m.flags & wire::EntryMeta::kHasOwner) && m.uid != st.st_uid) return false;
    if ((m.flags & wire::EntryMeta::kHasGroup) && m.gid != st.st_gid) return false;
    // Set-id bits that would not be kept are warned about by apply_one: left to it.
    const mode_t mode = mode_to_set(e, m, true);
    return (e.mode & 07777) == mode && (st.st_mode & 07777) == mode;
}

// A map node (the Stored, its key and the tree's pointers) and the attributes' strings.
uint64_t TreeMeta::cost(const Stored& s) {
    uint64_t n = sizeof(Stored) + 48;
    for (const auto& [k, v] : s.xattrs) n += sizeof(std::pair<std::string, std::string>) + k.capacity() + v.capacity();
    return n;
}

void TreeMeta::take_released(const DestTree& tree, std::span<const RecvFile> entries) {
    for (const RecvFile& f : entries) {
        auto it = meta_.find(f.entry.file_id);
        if (it == meta_.end()) continue;
        if (f.entry.kind != wire::EntryKind::file) {
            charge(sizeof(wire::ManifestEntry) + f.entry.path.capacity() + f.entry.link_target.capacity() + 48, f.entry.path);
            released_.emplace(f.entry.file_id, f.entry);
            continue;
        }
        apply_one(tree, f.entry, it->second);
        bytes_ -= cost(it->second);
        meta_.erase(it);
    }
}

template <class Fn>
auto TreeMeta::charged(Fn fn, const char* at) {
    const uint64_t before = owners_.bytes();
    auto r = fn();
    if (const uint64_t grown = owners_.bytes() - before) charge(grown, at); // a new name or id: rare
    return r;
}

void TreeMeta::add_owner_names(const std::vector<wire::OwnerName>& names) {
    charged([&] { owners_.add(names); return 0; }, "OWNER_NAMES");
}

uid_t TreeMeta::map_user(const std::string& name, uint32_t id) {
    return charged([&] { return owners_.user(id, name); }, "the table of user ids");
}

gid_t TreeMeta::map_group(const std::string& name, uint32_t id) {
    return charged([&] { return owners_.group(id, name); }, "the table of group ids");
}

void TreeMeta::map_acl_ids(const std::string& path, wire::EntryMeta& m) {
    for (auto& [key, value] : m.xattrs) {
        if (!wire::is_acl_name(key)) continue;
        wire::map_acl_ids(value, [&](bool group, uint32_t id) -> uint32_t {
            return group ? map_group({}, id) : map_user({}, id);
        });
        if (wire::normalize_acl(value))
            warnings_.add("separate ACL entries", path, "two of the sender's ids are one id here: their entries were merged");
    }
}

} // namespace sluice
