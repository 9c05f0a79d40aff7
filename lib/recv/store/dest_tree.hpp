#pragma once
// The receiver's view of DIR. Every path from the network is resolved with openat2
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, so nothing (no '..', no symlink planted in DIR or
// received earlier) can steer a write outside DIR. Files are written under a temporary name
// beside their final one and renamed into place only when complete and verified.
#include <filesystem>
#include <string>

#include "core/io/unique_fd.hpp"
#include "sluice/error.hpp"

namespace sluice {

class DirReplacer;

class DestTree {
public:
    // Throws Error(destination) if dir is missing, not a directory or not writable.
    explicit DestTree(const std::filesystem::path& dir);
    // No directory (a receiver writing to a Sink or an fd): every open fails.
    DestTree() : display_("(no directory)") {}

    const std::string& display() const { return display_; }
    // Opens an existing directory below DIR ("" is DIR itself).
    UniqueFd open_dir(const std::string& rel_dir) const;
    // Like open_dir, but a directory that is not there (or not a directory) is an empty fd, not
    // an error: --dry-run looks without creating. A path through a symlink is still refused.
    UniqueFd find_dir(const std::string& rel_dir) const;
    // Creates rel_dir and any missing parents below DIR.
    void make_dirs(const std::string& rel_dir) const;
    // make_dirs for a directory the manifest lists: an entry of another kind under that name
    // (a file, a symlink, a fifo: the source had one there before) is replaced, as rsync does.
    // Only the last component: a symlink or file among its parents is still refused.
    void make_dir_entry(const std::string& rel_dir) const;

    static std::string parent_of(const std::string& rel);
    static std::string name_of(const std::string& rel);
    // The temporary name of a file being received: deterministic, so a resume finds it.
    static std::string temp_name(const std::string& rel);

private:
    UniqueFd root_;
    std::string display_;
};

// Renames temp over name in dir, the last step of every entry the receiver makes. An empty
// directory under that name (the source had one there before) is removed first, as rsync
// does; a non-empty one gives way through replacer (--delete, dir_replacer.hpp) or, without
// one, is refused, the error naming path and why. On failure temp is removed: nothing
// half-made is left beside the final name. `what` names the kind ("file", "symlink").
// The refusal put_in_place gives for a non-empty directory in the way.
Error dir_in_the_way(const std::string& path, const std::string& what);
void put_in_place(int dir, const std::string& temp, const std::string& name, const std::string& path,
                  const std::string& what, DirReplacer* replacer);

// A data stream's cache of the directory it last wrote into (small files come in runs per
// directory, so most files cost no extra open).
class ParentDirCache {
public:
    explicit ParentDirCache(const DestTree& tree) : tree_(tree) {}
    int get(const std::string& rel_dir) {
        if (!fd_ || rel_dir != rel_) {
            fd_ = tree_.open_dir(rel_dir);
            rel_ = rel_dir;
        }
        return fd_.get();
    }

private:
    const DestTree& tree_;
    std::string rel_;
    UniqueFd fd_;
};

} // namespace sluice
