#include "serve/get/sources.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/io/file_times.hpp"
#include "core/io/sys_error.hpp"
#include "core/wire/link_target.hpp"
#include "core/wire/protocol.hpp"
#include "serve/engine/doc_root.hpp"

namespace sluice::serve {

namespace {

constexpr int kMaxDepth = 256;

struct Walk {
    GetSources& out;
    uint64_t max_files;
    const std::string& rel; // as requested, for messages

    // A regular file (its bytes), a directory (made at the client, empty or not) or a symlink
    // opened O_PATH (its target): send() tells them apart by the fd.
    void add(UniqueFd fd, const struct stat& st, std::string name, std::string target = {}) {
        if (out.list.size() >= max_files)
            throw Error(ErrorCode::source, "'" + rel + "' holds more than " + std::to_string(max_files) +
                                               " entries: more than one get session may hold open (ask for a subtree)");
        FdSource s;
        s.fd = fd.get();
        s.length = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
        s.name = std::move(name);
        s.mode = st.st_mode & 07777;
        wire::ManifestEntry e;
        e.file_id = out.entries.size();
        e.size = s.length;
        const auto mtime = ns_of_checked(st.st_mtim);
        if (!mtime) // as send() refuses it: the wire's time cannot carry it
            throw Error(ErrorCode::source, "'" + s.name + "' in '" + rel + "' has an mtime outside the years 1677-2262 that sluice can carry");
        e.mtime_ns = *mtime;
        e.mode = st.st_mode & 0777; // as send() announces an FdSource
        e.kind = S_ISDIR(st.st_mode) ? wire::EntryKind::directory : S_ISLNK(st.st_mode) ? wire::EntryKind::symlink : wire::EntryKind::file;
        e.path = s.name;
        e.link_target = std::move(target);
        out.entries.push_back(std::move(e));
        out.bytes += s.length;
        if (S_ISREG(st.st_mode)) ++out.files;
        out.fds.push_back(std::move(fd));
        out.list.push_back(std::move(s));
    }

    // A symlink is sent as a link when its target stays inside what lands at the client
    // (link_stays_inside, the test the client applies too); one that leads out is left out and
    // counted. The link is never followed here.
    void link(int dir_fd, const std::string& n, const std::string& name) {
        int fd = ::openat(dir_fd, n.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            ++out.skipped;
            return;
        }
        UniqueFd f(fd);
        struct stat st {};
        char target[wire::kMaxLinkTargetBytes + 1];
        ssize_t len = ::fstat(fd, &st) == 0 && S_ISLNK(st.st_mode) ? ::readlinkat(fd, "", target, sizeof target) : -1;
        if (len <= 0 || static_cast<size_t>(len) >= sizeof target ||
            !wire::link_stays_inside(name, std::string_view(target, static_cast<size_t>(len)))) {
            ++out.skipped;
            ++out.links_out;
            return;
        }
        add(std::move(f), st, name, std::string(target, static_cast<size_t>(len)));
    }

    // dir_fd is open; prefix is "" or "name/" under which its entries land.
    void tree(int dir_fd, const std::string& prefix, int depth) {
        if (depth > kMaxDepth) throw Error(ErrorCode::source, "'" + rel + "' is nested deeper than " + std::to_string(kMaxDepth));
        int dup = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
        if (dup < 0) throw_errno(ErrorCode::source, "'" + rel + "/" + prefix + "'");
        DIR* d = ::fdopendir(dup);
        if (!d) {
            ::close(dup);
            throw_errno(ErrorCode::source, "'" + rel + "/" + prefix + "'");
        }
        std::vector<std::string> names;
        errno = 0;
        while (dirent* e = ::readdir(d)) {
            std::string n = e->d_name;
            if (n != "." && n != "..") names.push_back(std::move(n));
        }
        int err = errno;
        ::closedir(d);
        if (err) throw_errno(ErrorCode::source, "reading the directory '" + rel + "/" + prefix + "'", err);
        std::sort(names.begin(), names.end()); // the same order every time: easier to follow and to resume
        for (const std::string& n : names) {
            // One component, not followed if it is a symlink (ELOOP): nothing leaves DIR.
            int fd = ::openat(dir_fd, n.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
            if (fd < 0 && errno == ELOOP) {
                link(dir_fd, n, prefix + n);
                continue;
            }
            if (fd < 0) {
                if (errno == ENXIO || errno == EACCES || errno == EPERM) {
                    ++out.skipped;
                    continue;
                }
                throw_errno(ErrorCode::source, "'" + prefix + n + "' in '" + rel + "'");
            }
            UniqueFd f(fd);
            struct stat st {};
            if (::fstat(fd, &st) != 0) throw_errno(ErrorCode::source, "'" + prefix + n + "'");
            if (S_ISDIR(st.st_mode)) {
                add(std::move(f), st, prefix + n); // before its entries: the receiver makes parents first
                tree(fd, prefix + n + "/", depth + 1);
            } else if (S_ISREG(st.st_mode)) {
                add(std::move(f), st, prefix + n);
            } else {
                ++out.skipped;
            }
        }
    }
};

} // namespace

GetSources open_get_sources(int root_fd, const std::string& rel, uint64_t max_files) {
    GetSources out;
    Opened o = open_beneath(root_fd, rel);
    const std::string shown = rel.empty() ? "/" : rel;
    if (o.status != 0) {
        out.status = o.status == 404 ? 404 : 403;
        out.message = "'" + shown + (o.status == 404 ? "': not found" : "': not served (outside the directory, or no permission)");
        return out;
    }
    struct stat st {};
    if (::fstat(o.fd.get(), &st) != 0) throw_errno(ErrorCode::source, "'" + shown + "'");
    const std::string base = rel.substr(rel.rfind('/') + 1); // rfind npos + 1 == 0: the whole name
    Walk w{out, max_files, shown};
    if (S_ISREG(st.st_mode)) {
        w.add(std::move(o.fd), st, base);
    } else if (S_ISDIR(st.st_mode)) {
        const int dir_fd = o.fd.get(); // stays open: owned by out.fds or by o
        if (!base.empty()) w.add(std::move(o.fd), st, base);
        w.tree(dir_fd, base.empty() ? "" : base + "/", 0);
    } else {
        out.status = 403;
        out.message = "'" + shown + "' is not a regular file or directory";
    }
    return out;
}

} // namespace sluice::serve
