#include "recv/store/tree_mirror.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"
#include "recv/store/tree_remove.hpp"

namespace sluice {

TreeMirror::TreeMirror(const wire::TreeOptionsFrame& t, std::function<void()> still_working)
    : replacer_(protect_, std::move(still_working)) {
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
    if (depth > tree_remove::kMaxDepth) throw Error(ErrorCode::destination, "'" + rel + "' is nested too deep for --delete");
    for (const std::string& name : tree_remove::names_in(dir_fd, rel)) {
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
        if (sent != listed.end()) {
            // A directory where the source now has a file, symlink, hard link or special file:
            // it gives way when that entry is in place (replacer_), not before. The dry run
            // lists what that removes, or refuses as the real run would.
            if (!dry_) continue;
            replacer_.check(dir_fd, name, path);
            list_all(dir_fd, name, path, is_dir, removed, depth);
            continue;
        }
        if (protect_.excluded(path, is_dir)) continue; // not ours to judge
        if (dry_)
            list_all(dir_fd, name, path, is_dir, removed, depth);
        else
            tree_remove::remove(dir_fd, name, path, protect_, removed, depth);
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
    if (depth > tree_remove::kMaxDepth) throw Error(ErrorCode::destination, "'" + rel + "' is nested too deep for --delete");
    if (protect_.excluded(rel, is_dir)) return false; // what tree_remove::remove keeps, it does not list
    bool all = true;
    if (is_dir) {
        UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) throw_errno(ErrorCode::destination, "cannot read '" + rel + "' for --delete");
        for (const std::string& n : tree_remove::names_in(sub.get(), rel)) {
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

} // namespace sluice
