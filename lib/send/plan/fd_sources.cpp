#include "send/plan/fd_sources.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <unordered_set>

#include "core/io/file_times.hpp"
#include "core/io/sys_error.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

namespace {

int64_t mtime_of(const FdSource& s, const struct stat& st, const std::string& which) {
    // Only -1 means "the file's own": any other time, before 1970 too, is the caller's choice.
    if (s.mtime_ns != -1) return s.mtime_ns;
    if (auto ns = ns_of_checked(st.st_mtim)) return *ns;
    throw Error(ErrorCode::source, which + " ('" + s.name +
                                       "') has an mtime outside the years 1677-2262 that sluice can carry; give mtime_ns");
}

// A directory (made at the receiver, empty or not) or a symlink opened with O_PATH |
// O_NOFOLLOW (its target read through the fd: the link the caller opened, not a name).
CheckedFdSource check_tree_source(const FdSource& s, const struct stat& st, const std::string& which, size_t id) {
    if (s.offset != 0 || s.length != 0)
        throw Error(ErrorCode::usage, which + " ('" + s.name + "') is a directory or symlink: offset and length must be 0");
    CheckedFdSource c;
    c.entry.file_id = id;
    c.entry.mode = s.mode & 0777;
    c.entry.path = s.name;
    c.entry.mtime_ns = mtime_of(s, st, which);
    c.fd = s.fd;
    if (S_ISDIR(st.st_mode)) {
        c.entry.kind = wire::EntryKind::directory;
        return c;
    }
    c.entry.kind = wire::EntryKind::symlink;
    std::string target(static_cast<size_t>(st.st_size > 0 ? st.st_size : 0) + 1, '\0');
    ssize_t n = ::readlinkat(s.fd, "", target.data(), target.size());
    if (n < 0) throw_errno(ErrorCode::source, "reading the symlink " + which + " ('" + s.name + "')");
    if (static_cast<size_t>(n) >= target.size())
        throw Error(ErrorCode::source, "the symlink " + which + " ('" + s.name + "') changed while it was read");
    target.resize(static_cast<size_t>(n));
    if (target.empty() || target.size() > wire::kMaxLinkTargetBytes)
        throw Error(ErrorCode::source, "the symlink " + which + " ('" + s.name + "') has a target sluice cannot carry (" +
                                           std::to_string(target.size()) + " bytes)");
    c.entry.link_target = std::move(target);
    return c;
}

} // namespace

std::vector<CheckedFdSource> check_fd_sources(const std::vector<FdSource>& sources) {
    std::vector<CheckedFdSource> out;
    std::unordered_set<std::string> names;
    for (const FdSource& s : sources) {
        const std::string which = "fd " + std::to_string(s.fd);
        if (s.name.empty()) throw Error(ErrorCode::usage, which + " has no name to store it under");
        try {
            wire::validate_relative_path(s.name);
        } catch (const Error& e) {
            throw Error(ErrorCode::usage, which + ": name " + e.what());
        }
        if (!names.insert(s.name).second) throw Error(ErrorCode::usage, "name '" + s.name + "' given twice");
        struct stat st {};
        if (s.fd < 0 || ::fstat(s.fd, &st) != 0)
            throw_errno(ErrorCode::source, which + " ('" + s.name + "')", s.fd < 0 ? EBADF : errno);
        if (S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)) {
            out.push_back(check_tree_source(s, st, which, out.size()));
            continue;
        }
        if (!S_ISREG(st.st_mode))
            throw Error(ErrorCode::source, which + " ('" + s.name +
                                               "') is not a regular file, a directory or a symlink; use send_pipe for pipes and sockets");
        int fl = ::fcntl(s.fd, F_GETFL);
        if ((fl & O_ACCMODE) == O_WRONLY) throw Error(ErrorCode::source, which + " ('" + s.name + "') is not open for reading");
        const uint64_t size = static_cast<uint64_t>(st.st_size);
        if (size == 0) {
            // procfs and sysfs files say 0 bytes and yield data: "to the end of the file" would be
            // nothing, sent with a success. pread moves no file offset of the caller's.
            unsigned char byte = 0;
            ssize_t n = 0;
            do n = ::pread(s.fd, &byte, 1, 0);
            while (n < 0 && errno == EINTR);
            if (n > 0)
                throw Error(ErrorCode::source, which + " ('" + s.name +
                                                   "') reports a size of 0 but has data (a procfs or sysfs "
                                                   "pseudo-file?); send its bytes with send_pipe instead");
        }
        if (s.offset > size || s.length > size - s.offset)
            throw Error(ErrorCode::source, which + " ('" + s.name + "'): range [" + std::to_string(s.offset) + ", +" +
                                               std::to_string(s.length) + ") lies beyond the end of its file (" +
                                               std::to_string(size) + " bytes)");
        CheckedFdSource c;
        c.entry.file_id = out.size();
        c.entry.kind = wire::EntryKind::file;
        c.entry.size = s.length;
        c.entry.mode = s.mode & 0777;
        c.entry.path = s.name;
        c.file_mtime_ns = ns_of(st.st_mtim); // compared only, at each block: saturating is enough
        c.entry.mtime_ns = mtime_of(s, st, which);
        c.base = s.offset;
        c.fd = s.fd;
        c.file_size = size;
        out.push_back(std::move(c));
    }
    return out;
}

void walk_fd_sources(const std::vector<CheckedFdSource>& sources, WalkVisitor& visit) {
    for (const CheckedFdSource& c : sources) {
        wire::ManifestEntry e = c.entry;
        visit.entry(std::move(e), "fd " + std::to_string(c.fd), kUnknownAllocation);
    }
}

void attach_fd_source(SourceFile& f, const CheckedFdSource& c) {
    f.base = c.base;
    f.fd = c.fd;
    f.file_size = c.file_size;
    f.file_mtime_ns = c.file_mtime_ns;
}

} // namespace sluice
