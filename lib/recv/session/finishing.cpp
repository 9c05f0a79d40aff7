#include "recv/session/finishing.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/io/file_times.hpp"
#include "core/io/sys_error.hpp"
#include "recv/store/journal.hpp"

namespace sluice {

void check_files_complete(FileTable& files) {
    for (uint64_t id = 0; id < files.size(); ++id) {
        if (files.released(id)) continue; // every entry of a released slab was complete
        RecvFile& f = files.at(id);
        if (f.entry.kind == wire::EntryKind::file && !files.is_complete(f))
            throw Error(ErrorCode::protocol, "'" + f.entry.path + "' is incomplete: " + std::to_string(f.verified_bytes) +
                                                 " of " + std::to_string(f.entry.size) + " bytes arrived");
    }
}

void make_symlinks(const DestTree& tree, std::span<const wire::ManifestEntry* const> links,
                   const std::function<void()>& still_working, DirReplacer* replacer) {
    for (const wire::ManifestEntry* link : links) {
        const wire::ManifestEntry& l = *link;
        still_working();
        UniqueFd dir = tree.open_dir(DestTree::parent_of(l.path));
        const std::string temp = DestTree::temp_name(l.path);
        ::unlinkat(dir.get(), temp.c_str(), 0); // one an earlier run left; usually none
        if (::symlinkat(l.link_target.c_str(), dir.get(), temp.c_str()) != 0)
            throw_errno(ErrorCode::destination, "cannot create symlink '" + l.path + "'");
        if (::utimensat(dir.get(), temp.c_str(), FileTimes(l.mtime_ns).t, AT_SYMLINK_NOFOLLOW) != 0) {
            const int err = errno;
            ::unlinkat(dir.get(), temp.c_str(), 0);
            throw_errno(ErrorCode::destination, "cannot set the mtime of symlink '" + l.path + "'", err);
        }
        put_in_place(dir.get(), temp, DestTree::name_of(l.path), l.path, "symlink", replacer);
    }
}

void apply_dir_metadata(const DestTree& tree, std::span<const wire::ManifestEntry* const> dirs, bool sync,
                        const std::function<void()>& still_working) {
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
        still_working();
        const wire::ManifestEntry& d = **it;
        UniqueFd fd = tree.open_dir(d.path);
        // Set-id and sticky bits from the network are dropped, as for files.
        if (::fchmod(fd.get(), d.mode & 0777) != 0) throw_errno(ErrorCode::destination, "cannot set the mode of '" + d.path + "'");
        if (::futimens(fd.get(), FileTimes(d.mtime_ns).t) != 0)
            throw_errno(ErrorCode::destination, "cannot set the mtime of '" + d.path + "'");
        if (sync && ::fsync(fd.get()) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + d.path + "'");
    }
    if (sync) {
        UniqueFd root = tree.open_dir("");
        if (::fsync(root.get()) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + tree.display() + "'");
    }
}

void remove_partial_files(FileTable& files, const DestTree& tree, bool keep_journaled) noexcept {
    for (uint64_t id = 0; id < files.size(); ++id) {
        if (files.released(id)) continue;
        RecvFile& f = files.at(id);
        if (f.entry.kind != wire::EntryKind::file || files.is_complete(f)) continue;
        if (keep_journaled && f.journaled) continue;
        try {
            UniqueFd dir = tree.open_dir(f.parent);
            ::unlinkat(dir.get(), f.temp.c_str(), 0); // best effort: the failure is already being reported
            journal::remove(dir.get(), f.temp);
        } catch (...) {}
    }
}

} // namespace sluice
