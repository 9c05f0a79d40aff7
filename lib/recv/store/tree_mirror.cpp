#include "recv/store/tree_mirror.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"

namespace sluice {

namespace {

// Deeper than any path the manifest may name (4095 bytes): a directory nest built to exhaust
// the stack is refused, not followed.
constexpr unsigned kMaxDepth = 2048;

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

} // namespace

TreeMirror::TreeMirror(const wire::TreeOptionsFrame& t) {
    for (const std::string& r : t.rules) protect_.add_rule(r);
}

std::vector<std::string> TreeMirror::delete_extraneous(const DestTree& tree, FileTable& files,
                                                       const std::function<void()>& still_working) {
    Listed listed;
    listed.reserve(files.size());
    std::vector<std::string> roots;
    for (uint64_t id = 0; id < files.size(); ++id) {
        const wire::ManifestEntry& e = files.at(id).entry;
        listed.emplace(e.path, e.kind == wire::EntryKind::directory);
        if (e.kind == wire::EntryKind::directory && e.path.find('/') == std::string::npos) roots.push_back(e.path);
    }
    std::vector<std::string> removed;
    for (const std::string& root : roots) {
        UniqueFd fd = tree.open_dir(root);
        sweep(fd.get(), root, listed, removed, still_working, 0);
    }
    return removed;
}

void TreeMirror::sweep(int dir_fd, const std::string& rel, const Listed& listed,
                       std::vector<std::string>& removed, const std::function<void()>& still_working, unsigned depth) {
    if (depth > kMaxDepth) throw Error(ErrorCode::destination, "'" + rel + "' is nested too deep for --delete");
    for (const std::string& name : names_in(dir_fd, rel)) {
        still_working();
        const std::string path = rel + "/" + name;
        struct stat st {};
        if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue; // gone meanwhile
        const bool is_dir = S_ISDIR(st.st_mode);
        const auto sent = listed.find(path);
        if (sent != listed.end() && !is_dir) continue;
        if (sent != listed.end() && sent->second) {
            UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
            if (!sub) throw_errno(ErrorCode::destination, "cannot open '" + path + "' for --delete");
            sweep(sub.get(), path, listed, removed, still_working, depth + 1);
            continue;
        }
        // Not sent, or a directory where the source now has a symlink, hard link or special file
        // (made after this sweep, so the directory gives way to it as rsync --delete does; a file
        // in its place was refused when registered). What the filters protect stays either way.
        if (sent == listed.end() && protect_.excluded(path, is_dir)) continue; // not ours to judge
        if (dry_)
            list_all(dir_fd, name, path, is_dir, removed, depth);
        else
            remove_all(dir_fd, name, path, removed, depth);
    }
}

std::vector<wire::DryRunDeleted::Path> TreeMirror::list_extraneous(const DestTree& tree, FileTable& files,
                                                                   const std::function<void()>& still_working) {
    dry_ = true;
    listed_bytes_ = 0;
    std::vector<std::string> found = delete_extraneous(tree, files, still_working);
    dry_ = false;
    std::vector<wire::DryRunDeleted::Path> out;
    out.reserve(found.size());
    for (std::string& p : found) {
        const bool dir = p.ends_with('/');
        if (dir) p.pop_back();
        out.push_back({.path = std::move(p), .is_dir = dir});
    }
    return out;
}

bool TreeMirror::list_all(int dir_fd, const std::string& name, const std::string& rel, bool is_dir,
                          std::vector<std::string>& removed, unsigned depth) {
    if (depth > kMaxDepth) throw Error(ErrorCode::destination, "'" + rel + "' is nested too deep for --delete");
    if (protect_.excluded(rel, is_dir)) return false; // what remove_all keeps, it does not list
    bool all = true;
    if (is_dir) {
        UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) throw_errno(ErrorCode::destination, "cannot read '" + rel + "' for --delete");
        for (const std::string& n : names_in(sub.get(), rel)) {
            struct stat st {};
            if (::fstatat(sub.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue; // gone meanwhile
            all = list_all(sub.get(), n, rel + "/" + n, S_ISDIR(st.st_mode), removed, depth + 1) && all;
        }
    }
    if (!all) return false;
    listed_bytes_ += rel.size() + 1;
    if (removed.size() >= wire::kMaxDryRunDeleted || listed_bytes_ > wire::kMaxDryRunDeletedBytes)
        throw Error(ErrorCode::destination, "--dry-run: more than " + std::to_string(removed.size()) + " paths (" +
                                                std::to_string(listed_bytes_ >> 20) + " MiB) would be deleted, too many to list");
    removed.push_back(is_dir ? rel + "/" : rel);
    return true;
}

bool TreeMirror::remove_all(int dir_fd, const std::string& name, const std::string& rel, std::vector<std::string>& removed,
                            unsigned depth) {
    if (depth > kMaxDepth) throw Error(ErrorCode::destination, "'" + rel + "' is nested too deep for --delete");
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return true; // gone meanwhile
        throw_errno(ErrorCode::destination, "cannot delete '" + rel + "'");
    }
    const bool is_dir = S_ISDIR(st.st_mode);
    // The sender's filters protect what they exclude at every depth, as rsync's do: a file they
    // exclude inside a directory the source no longer has stays, and so does that directory.
    if (protect_.excluded(rel, is_dir)) return false;
    if (!is_dir) {
        if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT)
            throw_errno(ErrorCode::destination, "cannot delete '" + rel + "'");
        removed.push_back(rel);
        return true;
    }
    UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) throw_errno(ErrorCode::destination, "cannot delete '" + rel + "'");
    bool all = true;
    for (const std::string& n : names_in(sub.get(), rel)) all = remove_all(sub.get(), n, rel + "/" + n, removed, depth + 1) && all;
    if (!all) return false; // kept for what is protected inside it
    if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0) throw_errno(ErrorCode::destination, "cannot delete '" + rel + "'");
    removed.push_back(rel);
    return true;
}

} // namespace sluice
