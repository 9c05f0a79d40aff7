#pragma once
// What the source walk reads beyond names, sizes, modes and mtimes (issue 17): owners (ids and
// names), extended attributes and POSIX ACLs, device numbers, and which files are hard links
// to one already listed. docs/protocol.md, "Tree metadata".
#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/wire/protocol.hpp"
#include "core/session/filter_rules.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

struct TreeOptions {
    bool hard_links = true; // files sharing an inode are sent once, linked on the receiver
    bool owner = true;      // uid with its name
    bool group = true;      // gid with its name
    bool xattrs = true;     // user., trusted., security. attributes
    bool acls = true;       // system.posix_acl_access / _default
    bool specials = true;   // fifos, sockets and devices re-created instead of skipped
    FilterRules filters;
    std::string usermap, groupmap; // for the receiver (TREE_OPTIONS)
    bool user_chown = false, group_chown = false; // that map is --chown's (TREE_OPTIONS bits 3, 4)
    bool any_meta() const { return owner || group || xattrs || acls; }
};

// Reads one entry's metadata (lstat already done). Returns nothing when the options carry
// none. Attributes the file system cannot list (ENOTSUP) are no attributes; any other failure
// to read one names the path (the receiver would otherwise lose it silently).
// From send()'s options; throws Error(usage) for a malformed filter rule.
TreeOptions tree_options_of(const SendOptions& o);

// Where the walk found an entry: its directory's fd and its name there (dir -1: use the path).
// A call relative to the directory walks one path component, not the whole path from /: most
// of the walk's kernel time on a tree of small files was path lookups.
struct EntryAt {
    int dir = -1;
    const char* name = nullptr;
};

std::optional<wire::EntryMeta> read_entry_meta(const std::string& path, const struct stat& st, const TreeOptions& opts,
                                               EntryAt at = {});

// Remembers the first listed name of every regular file with more than one link.
class HardLinkTracker {
public:
    struct First {
        uint64_t file_id;
        std::string rel;
    };
    // The first entry of st's inode, or nothing (and st is remembered as listed by file_id/rel).
    const First* seen(const struct stat& st, uint64_t file_id, const std::string& rel);

private:
    std::map<std::pair<dev_t, ino_t>, First> first_;
};

} // namespace sluice
