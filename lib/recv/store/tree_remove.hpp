#pragma once
// Removing a directory tree inside DIR, the way --delete removes: never through a symlink (a
// symlink is removed as itself, each directory is opened with O_NOFOLLOW from its parent's
// handle), and never what the sender's filters protect (rsync's --delete without
// --delete-excluded): a protected entry stays at any depth, and so do the directories above it.
// Shared by --delete's sweep (tree_mirror.hpp) and a directory that gives way to the entry the
// source now has under its name (dir_replacer.hpp).
#include <string>
#include <vector>

#include "core/session/filter_rules.hpp"

namespace sluice::tree_remove {

// Deeper than any path the manifest may name (4095 bytes): a directory nest built to exhaust
// the stack is refused, not followed.
inline constexpr unsigned kMaxDepth = 2048;

// The names in a directory (not "." and ".."), sorted. Throws destination Error naming rel.
std::vector<std::string> names_in(int dir_fd, const std::string& rel);

// Removes name (rel inside DIR) from dir_fd, a directory after its contents, each removed path
// appended to removed. False if something protect excludes kept it (a directory holding one);
// true also if it was gone already. Throws destination Error naming the path it could not remove.
bool remove(int dir_fd, const std::string& name, const std::string& rel, const FilterRules& protect,
            std::vector<std::string>& removed, unsigned depth = 0);

// The first path under the directory name (rel inside DIR) that protect excludes, "" if none:
// what would keep remove() from removing it whole.
std::string find_protected(int dir_fd, const std::string& name, const std::string& rel, const FilterRules& protect,
                           unsigned depth = 0);

} // namespace sluice::tree_remove
