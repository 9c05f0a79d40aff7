#pragma once
// The receiver's side of tree metadata (issue 17; docs/protocol.md "Tree metadata"): owners,
// extended attributes and ACLs of entries that carried them, hard links and special files.
// Kept apart from the file table so an entry without metadata costs nothing here; what it
// holds is counted and bounded like the table. Applied once every file is in place:
//   make_links_and_specials()  hard links to files of this transfer, fifos, sockets, devices
//   apply()                    owner and group (mapped by name unless numeric), attributes,
//                              ACLs, then the mode with its set-id bits where the owner was kept
// What cannot be kept (no privilege, a file system without user attributes, ...) is said in
// one warning per kind at the end with a count, never dropped silently; so is what the
// receiver's SenderTrust does not take from this sender (confine(), tree_trust.cpp).
#include <sys/stat.h>
#include <sys/types.h>

#include <functional>
#include <span>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/session/session_log.hpp"
#include "core/wire/protocol.hpp"
#include "recv/store/dest_tree.hpp"
#include "recv/store/file_table.hpp"
#include "recv/store/owner_map.hpp"
#include "recv/store/stale_xattrs.hpp"

namespace sluice {

// The kind an extended attribute is warned about under: "ACLs", "file capabilities",
// "user.* extended attributes", ...
std::string xattr_kind(const std::string& name);

// One warning per kind of metadata not kept: how many entries, the first one and why.
class MetaWarnings {
public:
    void add(const std::string& kind, const std::string& path, const std::string& why);
    // Logs one line per kind; returns how many entries lost something.
    uint64_t report(SessionLog& log) const;
    uint64_t count(const std::string& kind) const;
    // Each kind with its count, first entry and reason (Stats::metadata_not_kept).
    std::vector<MetadataNotKept> list() const;
    // The warning lines report() logs, '\n'-separated, cut at whole lines to max_bytes (a line
    // says how many kinds were left out): what FINAL_STATUS tells a sender (ControlSide).
    std::string text(size_t max_bytes) const;

private:
    struct Seen {
        uint64_t count = 0;
        std::string first, why;
    };
    std::map<std::string, Seen> kinds_;
};

class TreeMeta {
public:
    // max_bytes: the most memory the metadata of one transfer may hold.
    // trust: what of the sender's owners and privileges is taken (RecvOptions::sender_trust).
    TreeMeta(OwnerMap owners, uint64_t max_bytes, SenderTrust trust = SenderTrust::full)
        : owners_(std::move(owners)), max_bytes_(max_bytes), trust_(trust) {}

    // Control thread, each entry's metadata as it arrives, before anything else looks at it
    // (the dry run, map_acl_ids, add_meta): takes out what the trust does not let this sender
    // store (owners, groups, attributes outside user.*, ACLs naming someone under none) and
    // warns once per kind. Set-id and sticky bits are dropped when the mode is set (apply_one).
    void confine(const std::string& path, wire::EntryMeta& m);
    SenderTrust trust() const { return trust_; }

    // Control thread, as each entry is registered. Throws protocol Error for a hard link to
    // anything but an earlier regular file of this transfer, or when the limit is passed.
    void add_entry(const RecvFile& f);
    // in_place: f is a file already complete under its name (the quick check's lstat): what it
    // has already (owner, group, mode; no attributes to set) is not stored, so an update of an
    // unchanged tree costs no work per file at the end. With exact lists (set_exact) such a file
    // is still stored when it has attributes the sender's list lacks (one llistxattr, in
    // in_place_dir, the directory holding it).
    void add_meta(FileTable& files, const RecvFile& f, wire::EntryMeta&& m, const struct stat* in_place = nullptr,
                  int in_place_dir = -1);
    // TREE_OPTIONS' kExact* flags: apply() removes what the sender's lists lack in those namespaces.
    // Below full trust only user.* attributes and ACLs, what such a sender may set, are removed.
    void set_exact(uint32_t flags) { stale_.set_exact(flags, trust_ != SenderTrust::full); }
    bool exact() const { return stale_.on(); }
    // What apply() would remove (--dry-run lists it, dry_run_items.hpp).
    StaleXattrs& stale() { return stale_; }

    // Control thread, before the file table frees a slab of settled entries (issue 19): a
    // regular file's metadata is applied now (it is complete and in place) and forgotten; a
    // directory's or symlink's is kept with a copy of its entry for the end.
    void take_released(const DestTree& tree, std::span<const RecvFile> entries);

    void make_links_and_specials(const DestTree& tree, FileTable& files, const std::function<void()>& still_working);
    void apply(const DestTree& tree, FileTable& files, const std::function<void()>& still_working);

    // OWNER_NAMES: the sender's names of the ids its next pages use (OwnerMap::add).
    void add_owner_names(const std::vector<wire::OwnerName>& names);
    // TREE_OPTIONS' maps (OwnerMap::add_sender_maps).
    void add_sender_maps(const std::string& usermap, const std::string& groupmap, bool user_chown, bool group_chown) {
        owners_.add_sender_maps(usermap, groupmap, user_chown, group_chown);
    }
    // The receiver's id for the sender's user / group (OwnerMap; each id resolved once).
    // name: the entry trailer's name, if an older sender put one there.
    uid_t map_user(const std::string& name, uint32_t id);
    gid_t map_group(const std::string& name, uint32_t id);
    // Rewrites the ids of m's named-user and named-group ACL entries to the receiver's (the same
    // mapping as owners), in the kernel's entry order; before the dry run compares or add_meta
    // stores them. Two sender ids that became one local id are merged into one entry with both
    // permissions, warned about once (path: the entry's, for the warning).
    void map_acl_ids(const std::string& path, wire::EntryMeta& m);

    uint64_t bytes() const { return bytes_; }
    uint64_t hard_links() const { return links_.size(); }
    uint64_t specials() const { return specials_.size(); }
    const MetaWarnings& warnings() const { return warnings_; }

private:
    struct Stored {
        uint64_t id;
        uint8_t flags;
        uid_t uid;
        gid_t gid;
        uint64_t rdev;
        std::vector<std::pair<std::string, std::string>> xattrs;
    };
    void charge(uint64_t n, const std::string& path);
    void apply_one(const DestTree& tree, const wire::ManifestEntry& e, const Stored& m);
    // The mode apply_one sets: set-id bits only where the owner and group are the sender's and
    // the trust is full; below it, sticky only on directories.
    mode_t mode_to_set(const wire::ManifestEntry& e, const Stored& m, bool owner_kept) const;
    bool already_in_place(const wire::ManifestEntry& e, const Stored& m, const struct stat& st) const;
    // apply_one's warnings for the mode bits it did not set (why they were dropped).
    void warn_mode_bits(const wire::ManifestEntry& e, mode_t mode);
    // Removes the covered attributes the entry (listed by name in dir) has that m lacks (follow: `at` is a /proc/self/fd
    // handle; else a symlink's own name); true if any was removed. Failures are warned about.
    bool remove_stale(int dir, const std::string& at, bool follow, const std::string& path, const Stored& m);

    // The owner tables' growth is charged to bytes_ as it happens.
    template <class Fn>
    auto charged(Fn fn, const char* at);

    OwnerMap owners_;
    uint64_t max_bytes_;
    SenderTrust trust_;
    uint64_t bytes_ = 0;
    static uint64_t cost(const Stored& s);
    std::map<uint64_t, Stored> meta_;               // by file id (in file id order)
    std::vector<uint64_t> links_, specials_;        // file ids
    std::unordered_map<uint64_t, wire::ManifestEntry> released_; // entries of meta_ the table released
    std::vector<uint64_t> not_created_;             // specials that could not be made: no metadata
    MetaWarnings warnings_;
    StaleXattrs stale_;
    std::vector<std::string> stale_names_; // remove_stale's and add_meta's, reused
    std::string in_place_path_;            // add_meta's, reused
};

} // namespace sluice
