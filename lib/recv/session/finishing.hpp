#pragma once
// The end of a transfer on the receiving side: what must hold before the verdict, the entries
// made last, and what a failure may leave behind.
#include <functional>
#include <span>

#include "recv/store/dest_tree.hpp"
#include "recv/store/file_table.hpp"

namespace sluice {

// Throws protocol naming the first regular file that is not complete.
void check_files_complete(FileTable& files);
// Symlinks are made last, so that no path of the transfer can be resolved through one.
// still_working is called after each entry (the sender waits for this work: see
// ControlSide::still_working). A non-empty directory in a symlink's way gives way through
// replacer (--delete) or, when it is null, is refused.
void make_symlinks(const DestTree& tree, std::span<const wire::ManifestEntry* const> links, const std::function<void()>& still_working,
                   DirReplacer* replacer);
// Modes and mtimes of directories, deepest first (writing into a directory changes its
// mtime); with sync, every directory and DIR itself are fsynced.
void apply_dir_metadata(const DestTree& tree, std::span<const wire::ManifestEntry* const> dirs, bool sync,
                        const std::function<void()>& still_working);
// After a failure nothing incomplete may look complete. Partial files with a journal are kept
// for a resume (running the same transfer again) if keep_journaled; every other temporary
// file goes.
void remove_partial_files(FileTable& files, const DestTree& tree, bool keep_journaled) noexcept;

} // namespace sluice
