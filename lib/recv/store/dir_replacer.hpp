#pragma once
// --delete: a non-empty directory where the source now has a file, symlink, hard link or
// special file gives way to it, as under rsync --delete. The source says the whole old
// directory is gone, but nothing of it is removed before the new entry is complete: the entry
// is made under its temporary name, the directory is renamed aside (to "<temp name>.old" in
// the same parent, a name no sender may send), the entry is renamed into place (on failure the
// directory is renamed back), and only then is the directory removed, as --delete removes:
// never through a symlink, and never what the sender's filters protect. A protected entry
// inside refuses the replacement before anything moves (rsync: "cannot delete non-empty
// directory"), naming that entry. Without --delete there is no replacer and such a directory
// is refused (dest_tree.hpp, dir_in_the_way).
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/session/filter_rules.hpp"

namespace sluice {

class DirReplacer {
public:
    // protect outlives this (TreeMirror's rules); still_working is called during a long removal
    // (it may run on a data stream's thread).
    DirReplacer(const FilterRules& protect, std::function<void()> still_working)
        : protect_(protect), still_working_(std::move(still_working)) {}

    // Throws the refusal (destination Error naming path and the protected entry) if the
    // directory name in dir holds something the filters protect.
    void check(int dir, const std::string& name, const std::string& path) const;
    // temp (complete, in dir) takes the place of the non-empty directory name; what (e.g.
    // "file") names the entry's kind in errors. Thread-safe.
    void replace(int dir, const std::string& temp, const std::string& name, const std::string& path,
                 const std::string& what);
    // The paths removed so far (a directory after its contents), emptied.
    std::vector<std::string> take_removed();

private:
    const FilterRules& protect_;
    std::function<void()> still_working_;
    std::mutex mu_;
    std::vector<std::string> removed_;
};

} // namespace sluice
