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
        if (!S_ISREG(st.st_mode))
            throw Error(ErrorCode::source,
                        which + " ('" + s.name + "') is not a regular file; use send_pipe for pipes and sockets");
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
        // Only -1 means "the file's own": any other time, before 1970 too, is the caller's choice.
        if (s.mtime_ns != -1) {
            c.entry.mtime_ns = s.mtime_ns;
        } else if (auto ns = ns_of_checked(st.st_mtim)) {
            c.entry.mtime_ns = *ns;
        } else {
            throw Error(ErrorCode::source, which + " ('" + s.name +
                                               "') has an mtime outside the years 1677-2262 that sluice can carry; "
                                               "give mtime_ns");
        }
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
