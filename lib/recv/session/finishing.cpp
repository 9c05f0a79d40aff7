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
        RecvFile& f = files.at(id);
        if (f.entry.kind == wire::EntryKind::file && !files.is_complete(f))
            throw Error(ErrorCode::protocol, "'" + f.entry.path + "' is incomplete: " + std::to_string(f.verified_bytes) +
                                                 " of " + std::to_string(f.entry.size) + " bytes arrived");
    }
}

void make_symlinks(const DestTree& tree, std::span<RecvFile* const> links, const std::function<void()>& still_working) {
    for (RecvFile* l : links) {
        still_working();
        UniqueFd dir = tree.open_dir(l->parent);
        ::unlinkat(dir.get(), l->temp.c_str(), 0); // one an earlier run left; usually none
        if (::symlinkat(l->entry.link_target.c_str(), dir.get(), l->temp.c_str()) != 0)
            throw_errno(ErrorCode::destination, "cannot create symlink '" + l->entry.path + "'");
        if (::utimensat(dir.get(), l->temp.c_str(), FileTimes(l->entry.mtime_ns).t, AT_SYMLINK_NOFOLLOW) != 0)
            throw_errno(ErrorCode::destination, "cannot set the mtime of symlink '" + l->entry.path + "'");
        if (::renameat(dir.get(), l->temp.c_str(), dir.get(), l->name.c_str()) != 0)
            throw_errno(ErrorCode::destination, "cannot put symlink '" + l->entry.path + "' in place");
    }
}

void apply_dir_metadata(const DestTree& tree, std::span<RecvFile* const> dirs, bool sync,
                        const std::function<void()>& still_working) {
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
        still_working();
        const RecvFile* d = *it;
        UniqueFd fd = tree.open_dir(d->entry.path);
        // Set-id and sticky bits from the network are dropped, as for files.
        if (::fchmod(fd.get(), d->entry.mode & 0777) != 0)
            throw_errno(ErrorCode::destination, "cannot set the mode of '" + d->entry.path + "'");
        if (::futimens(fd.get(), FileTimes(d->entry.mtime_ns).t) != 0)
            throw_errno(ErrorCode::destination, "cannot set the mtime of '" + d->entry.path + "'");
        if (sync && ::fsync(fd.get()) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + d->entry.path + "'");
    }
    if (sync) {
        UniqueFd root = tree.open_dir("");
        if (::fsync(root.get()) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + tree.display() + "'");
    }
}

void remove_partial_files(FileTable& files, const DestTree& tree, bool keep_journaled) noexcept {
    for (uint64_t id = 0; id < files.size(); ++id) {
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
