#pragma once
// --delete (TREE_OPTIONS kDelete): once the transfer is complete, removes what DIR has under the
// roots the manifest sent that the manifest does not list, except what the sender's filter
// rules exclude (rsync's --delete without --delete-excluded). Never outside DIR (every
// directory is opened through DestTree, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and never
// through a symlink: a symlink is removed as itself, a directory is emptied through a handle
// opened with O_NOFOLLOW.
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/session/filter_rules.hpp"
#include "core/wire/protocol.hpp"
#include "recv/store/dest_tree.hpp"
#include "recv/store/dir_replacer.hpp"
#include "recv/store/file_table.hpp"

namespace sluice {

class TreeMirror {
public:
    // still_working: called during a directory's removal by replacer() (on a stream's thread too).
    TreeMirror(const wire::TreeOptionsFrame& t, std::function<void()> still_working);
    TreeMirror(const TreeMirror&) = delete;
    TreeMirror& operator=(const TreeMirror&) = delete;

    // Where a non-empty directory gives way to the entry the source now has under its name; what
    // it removed is not among delete_extraneous's paths (take them from it).
    DirReplacer& replacer() { return replacer_; }

    // Returns the relative paths removed, in the order they were (a directory after its contents).
    // A directory where the source now has another kind of entry is left to replacer().
    std::vector<std::string> delete_extraneous(const DestTree& tree, FileTable& files,
                                               const std::function<void()>& still_working);
    // --dry-run: what delete_extraneous and replacer() would remove, removing nothing; throws
    // replacer()'s refusal for a directory holding a protected entry, as the real run would.
    // Throws destination Error past wire::kMaxDryRunDeleted paths (more than a sender lists).
    std::vector<wire::DryRunDeleted::Path> list_extraneous(const DestTree& tree, FileTable& files,
                                                          const std::function<void()>& still_working);

private:
    // The manifest's paths, each with whether it is a directory entry.
    using Listed = std::unordered_map<std::string_view, bool>;
    void sweep(int dir_fd, const std::string& rel, const Listed& listed,
               std::vector<std::string>& removed, const std::function<void()>& still_working, unsigned depth);
    // dry_: what remove_all would remove; a directory's path gets a '/' at its end (names never have one).
    bool list_all(int dir_fd, const std::string& name, const std::string& rel, bool is_dir, std::vector<std::string>& removed,
                  unsigned depth);
    bool dry_ = false;
    uint64_t listed_bytes_ = 0; // dry_: the paths' bytes so far

    FilterRules protect_;
    DirReplacer replacer_;
};

} // namespace sluice
