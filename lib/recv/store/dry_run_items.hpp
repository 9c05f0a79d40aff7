#pragma once
// --dry-run at the receiver (docs/protocol.md "Dry run"): what a transfer would change in DIR,
// entry by entry, found by looking (fstatat, readlinkat) and never by writing. The letters are
// rsync's --itemize-changes (the sender prints them): a file is sent when it is new or its size
// or mtime differs (the quick check; updated by changed blocks where it exists), and its mode,
// owner and group are compared with what the receiver would set, and each extended attribute
// and ACL the sender sends with what the name has (rsync's 'x' and 'a'), and, where the
// sender's lists are complete (exact lists), each one it lacks, which the real run removes.
#include <sys/types.h>

#include <string>
#include <utility>
#include <unordered_set>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/wire/protocol.hpp"
#include "recv/store/dest_tree.hpp"
#include "recv/store/file_table.hpp"
#include "recv/store/tree_meta.hpp"

namespace sluice {

class DryRunItems {
public:
    // ids: maps the sender's owner and group names to ours (TreeMeta's cache and rules).
    DryRunItems(const DestTree& tree, TreeMeta& ids);

    // Control thread, for each entry as it is registered (m: its metadata trailer, if any).
    void add(const RecvFile& f, const wire::EntryMeta* m);
    // This page's changed entries, in id order (none if nothing would change); then forgotten.
    std::vector<wire::DryRunItem> take_page() { return std::exchange(page_, {}); }

private:
    uint16_t changes_of(const RecvFile& f, const wire::EntryMeta* m);
    uint16_t meta_changes(const wire::ManifestEntry& e, const wire::EntryMeta* m, const struct stat& st);
    uint16_t owner_changes(const wire::EntryMeta* m, const struct stat& st);
    uint16_t xattr_changes(int dir, const std::string& name, const wire::EntryMeta* m);
    // f's parent directory, or -1 if DIR has none there (so f is new).
    int parent_fd(const std::string& rel);

    const DestTree& tree_;
    TreeMeta& ids_;
    const bool root_; // only root sets owners (and set-id bits with them)
    std::string parent_rel_ = "\x01"; // no real path equals this
    UniqueFd parent_;
    std::unordered_set<uint64_t> written_; // files that would be written: their hard links are made again
    std::vector<wire::DryRunItem> page_;
    std::vector<char> value_; // xattr_changes' buffer, kept between entries
    std::vector<std::string> stale_; // xattr_changes' names the sender's complete lists lack
};

} // namespace sluice
