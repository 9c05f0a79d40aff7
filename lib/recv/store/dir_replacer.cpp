#include "recv/store/dir_replacer.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "core/io/sys_error.hpp"
#include "recv/store/tree_remove.hpp"

namespace sluice {

void DirReplacer::check(int dir, const std::string& name, const std::string& path) const {
    const std::string kept = tree_remove::find_protected(dir, name, path, protect_);
    if (!kept.empty())
        throw Error(ErrorCode::destination, "cannot replace directory '" + path + "' with what the source has there: '" + kept +
                                                "' inside it is protected by the filters (--exclude), so the directory "
                                                "cannot be deleted (rsync: cannot delete non-empty directory)");
}

void DirReplacer::replace(int dir, const std::string& temp, const std::string& name, const std::string& path,
                          const std::string& what) {
    auto refuse = [&](const std::string& why, int err) {
        ::unlinkat(dir, temp.c_str(), 0); // nothing half-made beside the final name
        throw_errno(ErrorCode::destination, "cannot put " + what + " '" + path + "' in place of the directory there: " + why, err);
    };
    try {
        check(dir, name, path);
    } catch (...) {
        ::unlinkat(dir, temp.c_str(), 0);
        throw;
    }
    const std::string aside = temp + ".old";
    std::vector<std::string> removed;
    // One an interrupted earlier replacement left (the entry was in place, its old directory
    // not yet removed): removed now, so the rename below has its name.
    if (!tree_remove::remove(dir, aside, path, protect_, removed))
        refuse("an earlier run's '" + aside + "' holds protected entries", EEXIST);
    if (::renameat2(dir, name.c_str(), dir, aside.c_str(), RENAME_NOREPLACE) != 0)
        refuse("cannot move it aside", errno);
    if (::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
        const int err = errno;
        if (::renameat2(dir, aside.c_str(), dir, name.c_str(), RENAME_NOREPLACE) != 0)
            throw_errno(ErrorCode::destination, "cannot put " + what + " '" + path + "' in place, nor the directory back "
                                                "(it is '" + aside + "' beside it)", err);
        refuse("rename", err);
    }
    // The entry is in place: the old directory goes, listed under the path it had.
    if (still_working_) still_working_();
    const bool all = tree_remove::remove(dir, aside, path, protect_, removed);
    {
        std::lock_guard lk(mu_);
        removed_.insert(removed_.end(), removed.begin(), removed.end());
    }
    if (!all) // protected since check(): what is protected stays, under the aside name
        throw Error(ErrorCode::destination, "'" + path + "' is in place, but a protected entry appeared in the directory it "
                                                "replaced, which stays as '" + aside + "'");
}

std::vector<std::string> DirReplacer::take_removed() {
    std::lock_guard lk(mu_);
    return std::exchange(removed_, {});
}

} // namespace sluice
