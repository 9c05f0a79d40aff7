#include "recv/store/tree_remove.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"

namespace sluice::tree_remove {

namespace {

void check_depth(unsigned depth, const std::string& rel) {
    if (depth > kMaxDepth) throw Error(ErrorCode::destination, "'" + rel + "' is nested too deep for --delete");
}

} // namespace

std::vector<std::string> names_in(int dir_fd, const std::string& rel) {
    const int dup = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    DIR* d = dup < 0 ? nullptr : ::fdopendir(dup);
    if (!d) {
        if (dup >= 0) ::close(dup);
        throw_errno(ErrorCode::destination, "cannot read directory '" + rel + "' for --delete");
    }
    std::vector<std::string> names;
    while (dirent* de = ::readdir(d)) {
        std::string_view n = de->d_name;
        if (n != "." && n != "..") names.emplace_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

bool remove(int dir_fd, const std::string& name, const std::string& rel, const FilterRules& protect,
            std::vector<std::string>& removed, unsigned depth) {
    check_depth(depth, rel);
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return true; // gone meanwhile
        throw_errno(ErrorCode::destination, "cannot delete '" + rel + "'");
    }
    const bool is_dir = S_ISDIR(st.st_mode);
    // The sender's filters protect what they exclude at every depth, as rsync's do: a file they
    // exclude inside a directory the source no longer has stays, and so does that directory.
    if (protect.excluded(rel, is_dir)) return false;
    if (!is_dir) {
        if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT)
            throw_errno(ErrorCode::destination, "cannot delete '" + rel + "'");
        removed.push_back(rel);
        return true;
    }
    UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) throw_errno(ErrorCode::destination, "cannot delete '" + rel + "'");
    bool all = true;
    for (const std::string& n : names_in(sub.get(), rel))
        all = remove(sub.get(), n, rel + "/" + n, protect, removed, depth + 1) && all;
    if (!all) return false; // kept for what is protected inside it
    if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0) throw_errno(ErrorCode::destination, "cannot delete '" + rel + "'");
    removed.push_back(rel);
    return true;
}

std::string find_protected(int dir_fd, const std::string& name, const std::string& rel, const FilterRules& protect,
                           unsigned depth) {
    check_depth(depth, rel);
    UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) return {}; // not a directory (any more): nothing inside to protect
    for (const std::string& n : names_in(sub.get(), rel)) {
        struct stat st {};
        if (::fstatat(sub.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue; // gone meanwhile
        const std::string path = rel + "/" + n;
        const bool is_dir = S_ISDIR(st.st_mode);
        if (protect.excluded(path, is_dir)) return path;
        if (is_dir) {
            std::string inner = find_protected(sub.get(), n, path, protect, depth + 1);
            if (!inner.empty()) return inner;
        }
    }
    return {};
}

} // namespace sluice::tree_remove
