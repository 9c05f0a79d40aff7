#include "send/plan/source_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"

namespace sluice {

namespace {

int64_t mtime_ns_of(const struct stat& st) {
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

const char* special_kind(mode_t m) {
    if (S_ISFIFO(m)) return "fifo";
    if (S_ISSOCK(m)) return "socket";
    if (S_ISCHR(m)) return "character device";
    if (S_ISBLK(m)) return "block device";
    return "special file";
}

std::string read_link(const std::string& path, size_t size_hint) {
    std::string target(std::max<size_t>(size_hint, 64) + 1, '\0');
    ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n < 0) throw_errno(ErrorCode::source, "cannot read symlink '" + path + "'");
    if (static_cast<size_t>(n) >= target.size()) return read_link(path, target.size() * 2);
    target.resize(static_cast<size_t>(n));
    return target;
}

class Walker {
public:
    explicit Walker(const WalkVisitor& visit) : visit_(visit) {}

    void visit(const std::string& src, const std::string& rel) {
        struct stat st {};
        if (::lstat(src.c_str(), &st) != 0) throw_errno(ErrorCode::source, "cannot stat '" + src + "'");
        wire::ManifestEntry e;
        e.path = rel;
        e.mode = st.st_mode & 07777;
        e.mtime_ns = mtime_ns_of(st);
        if (S_ISREG(st.st_mode)) {
            e.kind = wire::EntryKind::file;
            e.size = static_cast<uint64_t>(st.st_size);
            emit(std::move(e), std::string(src));
        } else if (S_ISLNK(st.st_mode)) {
            e.kind = wire::EntryKind::symlink;
            e.link_target = read_link(src, static_cast<size_t>(st.st_size));
            emit(std::move(e), {});
        } else if (S_ISDIR(st.st_mode)) {
            e.kind = wire::EntryKind::directory;
            emit(std::move(e), {});
            for (const std::string& name : list_dir(src)) visit(src + "/" + name, rel + "/" + name);
        } else {
            visit_.skipped("skipping " + std::string(special_kind(st.st_mode)) + " '" + src + "'");
        }
    }

private:
    void emit(wire::ManifestEntry&& e, std::string&& src) {
        e.file_id = next_id_++;
        visit_.entry(std::move(e), std::move(src));
    }

    // Sorted names, so that manifests (and resumes) are deterministic.
    static std::vector<std::string> list_dir(const std::string& dir) {
        UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!fd) throw_errno(ErrorCode::source, "cannot open directory '" + dir + "'");
        DIR* d = ::fdopendir(fd.get());
        if (!d) throw_errno(ErrorCode::source, "cannot read directory '" + dir + "'");
        fd.release();
        std::vector<std::string> names;
        errno = 0;
        while (dirent* de = ::readdir(d)) {
            std::string_view n = de->d_name;
            if (n != "." && n != "..") names.emplace_back(n);
        }
        int err = errno;
        ::closedir(d);
        if (err) throw_errno(ErrorCode::source, "cannot read directory '" + dir + "'", err);
        std::sort(names.begin(), names.end());
        return names;
    }

    const WalkVisitor& visit_;
    uint64_t next_id_ = 0;
};

} // namespace

std::vector<SourceRoot> check_sources(const std::vector<std::string>& paths) {
    if (paths.empty()) throw Error(ErrorCode::usage, "no source paths given");
    std::vector<SourceRoot> roots;
    std::set<std::string> names;
    for (const std::string& p : paths) {
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0) throw_errno(ErrorCode::source, "source '" + p + "'");
        if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
            if (::access(p.c_str(), R_OK | (S_ISDIR(st.st_mode) ? X_OK : 0)) != 0)
                throw_errno(ErrorCode::source, "source '" + p + "' is not readable");
        } else if (!S_ISLNK(st.st_mode)) {
            throw Error(ErrorCode::source, "source '" + p + "' is a " + special_kind(st.st_mode) + ", not a file or directory");
        }
        std::filesystem::path abs = std::filesystem::absolute(p).lexically_normal();
        if (!abs.has_filename()) abs = abs.parent_path();
        std::string name = abs.filename().string();
        if (name.empty() || name == "/" || name == "..")
            throw Error(ErrorCode::source,
                        "source '" + p + "' has no name to use under the destination (send its contents instead)");
        if (!names.insert(name).second)
            throw Error(ErrorCode::source, "two sources would both be received as '" + name + "' (second: '" + p + "')");
        roots.push_back({p, name});
    }
    return roots;
}

void walk_sources(const std::vector<SourceRoot>& roots, const WalkVisitor& visit) {
    Walker w(visit);
    for (const auto& r : roots) w.visit(r.path, r.name);
}

} // namespace sluice
