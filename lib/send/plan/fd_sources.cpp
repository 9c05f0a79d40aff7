#include "send/plan/fd_sources.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <unordered_set>

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
        c.file_mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
        c.entry.mtime_ns = s.mtime_ns >= 0 ? s.mtime_ns : c.file_mtime_ns;
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
        visit.entry(std::move(e), "fd " + std::to_string(c.fd));
    }
}

void attach_fd_source(SourceFile& f, const CheckedFdSource& c) {
    f.base = c.base;
    f.fd = c.fd;
    f.file_size = c.file_size;
    f.file_mtime_ns = c.file_mtime_ns;
}

} // namespace sluice
