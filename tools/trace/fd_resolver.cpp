#include "fd_resolver.hpp"

#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace sluice::trace {
namespace {

FdInfo from_stat(const struct stat& st) {
    FdInfo info;
    info.dev = st.st_dev;
    info.ino = st.st_ino;
    switch (st.st_mode & S_IFMT) {
    case S_IFREG:
    case S_IFBLK: info.cls = FdClass::file; break;
    case S_IFIFO: info.cls = FdClass::pipe; break;
    case S_IFSOCK: info.cls = FdClass::socket; break;
    case S_IFCHR:
        if (major(st.st_rdev) == 1 && minor(st.st_rdev) == 3)
            info.cls = FdClass::devnull;
        else if (major(st.st_rdev) == 1 && minor(st.st_rdev) == 5)
            info.cls = FdClass::devzero;
        else
            info.cls = FdClass::other;
        break;
    default: info.cls = FdClass::other; break;
    }
    return info;
}

// Paths that name the opening process's own fds: stat'ing them here would see ours.
bool names_own_fds(std::string_view p) {
    return p.starts_with("/proc/") || p.starts_with("/dev/fd/") || p == "/dev/stdin" || p == "/dev/stdout" || p == "/dev/stderr";
}

} // namespace

FdInfo FdResolver::resolve(uint32_t pid, int32_t fd) {
    std::string base = "/proc/" + std::to_string(pid);
    struct stat st;
    if (fd < 0 || stat((base + "/fd/" + std::to_string(fd)).c_str(), &st) != 0)
        return FdInfo{}; // closed already, or the process is gone
    FdInfo info = from_stat(st);
    // "flags:\t02100001" (octal): access mode in the low two bits, plus O_DIRECT, O_CLOEXEC.
    std::ifstream fi(base + "/fdinfo/" + std::to_string(fd));
    for (std::string key; fi >> key;) {
        if (key == "flags:") {
            std::string v;
            fi >> v;
            unsigned long flags = std::stoul(v, nullptr, 8);
            info.writable = (flags & O_ACCMODE) != O_RDONLY;
            info.direct = (flags & O_DIRECT) != 0; // this architecture's value (arm64's differs)
            info.cloexec = (flags & O_CLOEXEC) != 0;
            break;
        }
    }
    return info;
}

FdInfo FdResolver::resolve_path(const std::string& path) {
    struct stat st;
    if (path.empty() || stat(path.c_str(), &st) != 0) return FdInfo{};
    return from_stat(st);
}

std::vector<std::pair<int32_t, FdInfo>> FdResolver::list(uint32_t pid) {
    std::vector<std::pair<int32_t, FdInfo>> out;
    DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
    if (!d) return out;
    while (auto* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        int32_t fd = static_cast<int32_t>(std::stol(e->d_name));
        FdInfo info = resolve(pid, fd);
        if (info.cls != FdClass::unresolved) out.emplace_back(fd, info);
    }
    closedir(d);
    return out;
}

void FdResolver::keep(uint32_t id, FdInfo info, unsigned Counts::*how) {
    if (cache_.count(id)) return;
    cache_[id] = info;
    ++(counts_.*(info.cls == FdClass::unresolved ? &Counts::unresolved : how));
}

void FdResolver::seen(const sl_event& ev) {
    FdInfo info;
    if (late_proc_) {
        info = resolve(ev.tgid, ev.fd);
        if (current_ && current_(ev.tgid, ev.fd) != ev.id)
            info = FdInfo{}; // closed, dup'ed over or exec'd since the probe saw it: do not guess
    }
    keep(ev.id, info, &Counts::seen_proc);
}

std::string FdResolver::absolute(const sl_open_event& e) const {
    if (e.path_len <= 0 || e.path_len >= SL_PATH_MAX) return ""; // none, or truncated
    std::string path(e.path, strnlen(e.path, sizeof(e.path)));
    if (path.starts_with("/")) return path;
    const std::map<uint32_t, std::string>& dirs = e.dirfd == AT_FDCWD ? cwd_ : paths_;
    auto it = dirs.find(e.dirfd == AT_FDCWD ? e.ev.tgid : e.dir_id);
    return it == dirs.end() || it->second.empty() ? "" : it->second + "/" + path;
}

void FdResolver::opened(const sl_open_event& e) {
    const sl_event& ev = e.ev;
    auto with_open_flags = [&](FdInfo info) {
        // The flags open() was given, which the probe read: not what fdinfo says later.
        info.writable = (ev.flags & SL_FLAG_FD_WRITABLE) != 0;
        info.direct = (ev.flags & SL_FLAG_FD_DIRECT) != 0;
        return info;
    };
    std::string path = absolute(e);
    // Directories (class other) are remembered, for fchdir and openat relative to them.
    auto done = [&](FdInfo info, unsigned Counts::*how) {
        if (!path.empty() && (info.cls == FdClass::other || info.cls == FdClass::unresolved)) paths_[ev.id] = path;
        keep(ev.id, info.cls == FdClass::unresolved ? info : with_open_flags(info), how);
    };
    if (late_proc_ && current_ && current_(ev.tgid, ev.fd) == ev.id) {
        FdInfo info = resolve(ev.tgid, ev.fd);
        if (info.cls != FdClass::unresolved && current_(ev.tgid, ev.fd) == ev.id) return done(info, &Counts::opened_proc);
    }
    // The fd is gone (or changed): the path still names the file, unless it was removed or
    // renamed since. A path naming the process's own fds cannot be used from here.
    FdInfo info;
    if (!path.empty() && !names_own_fds(path))
        info = resolve_path(path);
    else if (late_proc_ && path.empty() && e.path_len > 0 && e.path_len < SL_PATH_MAX)
        // Relative, from a directory not followed: only while the process is there.
        info = resolve_path("/proc/" + std::to_string(ev.tgid) +
                            (e.dirfd == AT_FDCWD ? "/cwd/" : "/fd/" + std::to_string(e.dirfd) + "/") +
                            std::string(e.path, strnlen(e.path, sizeof(e.path))));
    done(info, &Counts::opened_path);
}

void FdResolver::started(uint32_t pid) {
    char buf[4096];
    ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/cwd").c_str(), buf, sizeof(buf) - 1);
    if (n > 0) cwd_[pid].assign(buf, static_cast<size_t>(n));
}

void FdResolver::forked(uint32_t child, uint32_t parent) {
    auto it = cwd_.find(parent);
    if (it != cwd_.end()) cwd_[child] = it->second;
}

void FdResolver::chdir(const sl_open_event& e) {
    std::string dir;
    if (e.ev.fd == AT_FDCWD) {
        dir = absolute(e); // chdir(path): relative to the old cwd
    } else if (auto it = paths_.find(e.ev.id); e.ev.id != 0 && it != paths_.end()) {
        dir = it->second; // fchdir(fd) on a directory opened by path
    }
    if (dir.empty())
        cwd_.erase(e.ev.tgid); // not known any more: relative paths fall back to /proc
    else
        cwd_[e.ev.tgid] = dir;
}

FdInfo FdResolver::lookup(uint32_t id) const {
    auto it = cache_.find(id);
    return it == cache_.end() ? FdInfo{} : it->second;
}

} // namespace sluice::trace
