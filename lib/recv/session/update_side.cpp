#include "recv/session/update_side.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "core/checksum/xxh3.hpp"
#include "core/io/sys_error.hpp"
#include "core/io/file_times.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "recv/store/journal.hpp"

namespace sluice {

namespace {

int64_t mtime_of(const struct stat& st) { return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec; }

UniqueFd open_old(const DestTree& tree, const RecvFile& f, struct stat& st) {
    UniqueFd dir = tree.open_dir(f.parent);
    UniqueFd fd(::openat(dir.get(), f.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return UniqueFd();
    return fd;
}

} // namespace

void UpdateSide::set_params(const wire::UpdateParams& p) {
    if (active()) throw Error(ErrorCode::protocol, "UPDATE_PARAMS sent twice");
    params_ = p;
}

std::optional<wire::BlockSums> UpdateSide::offer(const DestTree& tree, const RecvFile& f, const std::function<void()>& working) {
    if (!active() || f.entry.sparse || f.entry.size == 0) return std::nullopt;
    struct stat st {};
    UniqueFd fd = open_old(tree, f, st);
    if (!fd || st.st_size == 0) return std::nullopt;
    const uint64_t size = static_cast<uint64_t>(st.st_size), b = params_.block_size;
    const uint64_t blocks = (size + b - 1) / b;
    // One frame: 24 bytes and 8 per block (8 TiB of old file at 8 MiB blocks).
    if (24 + blocks * 8 > wire::kMaxControlPayload) return std::nullopt;
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    wire::BlockSums s{.file_id = f.entry.file_id, .old_size = size, .sums = {}};
    s.sums.reserve(blocks);
    std::vector<unsigned char> buf(std::min<uint64_t>(b, 1 << 20));
    Xxh3 h;
    for (uint64_t off = 0; off < size; off += b) {
        const uint64_t len = std::min(b, size - off);
        h.reset();
        for (uint64_t done = 0; done < len;) {
            ssize_t n = ::pread(fd.get(), buf.data(), std::min<uint64_t>(buf.size(), len - done), static_cast<off_t>(off + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return std::nullopt; // shortened or unreadable meanwhile: sent whole instead
            h.update(buf.data(), static_cast<size_t>(n));
            done += static_cast<uint64_t>(n);
        }
        s.sums.push_back(h.digest());
        working();
    }
    offered_[f.entry.file_id] = Old{size, mtime_of(st), st.st_ino};
    return s;
}

uint64_t UpdateSide::copy_range(int from, int to, uint64_t offset, uint64_t length, const std::string& path) {
    loff_t in = static_cast<loff_t>(offset), out = in;
    uint64_t left = length;
    while (left && fallback_.empty()) {
        ssize_t n = ::copy_file_range(from, &in, to, &out, left, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)) {
            fallback_ = "update: copy_file_range refused (" + std::string(std::strerror(errno)) +
                        "): unchanged blocks copied through a buffer";
            break;
        }
        if (n < 0) throw_errno(ErrorCode::destination, "cannot copy the unchanged blocks of '" + path + "'");
        if (n == 0) throw Error(ErrorCode::destination, "the old version of '" + path + "' became shorter during the update");
        left -= static_cast<uint64_t>(n);
    }
    std::vector<unsigned char> buf(left ? 1 << 20 : 0);
    while (left) {
        ssize_t n = ::pread(from, buf.data(), std::min<uint64_t>(buf.size(), left), in);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw_errno(ErrorCode::destination, "cannot read the old version of '" + path + "'", n == 0 ? EIO : errno);
        for (ssize_t w = 0; w < n;) {
            ssize_t k = ::pwrite(to, buf.data() + w, static_cast<size_t>(n - w), out + w);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) throw_errno(ErrorCode::destination, "cannot write '" + path + "'", k == 0 ? ENOSPC : errno);
            w += k;
        }
        in += n;
        out += n;
        left -= static_cast<uint64_t>(n);
    }
    return length;
}

UpdateSide::Applied UpdateSide::apply(const DestTree& tree, FileTable& files, const wire::Reuse& r, bool sync) {
    RecvFile* f = files.find(r.file_id);
    auto it = offered_.find(r.file_id);
    if (!f || it == offered_.end())
        throw Error(ErrorCode::protocol, "REUSE for file id " + std::to_string(r.file_id) + ", whose old version was not offered");
    const Old old = it->second;
    offered_.erase(it);
    const std::string& path = f->entry.path;
    const uint64_t limit = std::min(old.size, f->entry.size);
    for (const wire::Extent& x : r.ranges)
        if (x.offset + x.length > limit)
            throw Error(ErrorCode::protocol, "REUSE range [" + std::to_string(x.offset) + ", +" + std::to_string(x.length) +
                                                 ") of '" + path + "' lies past its old or new size");
    struct stat st {};
    UniqueFd from = open_old(tree, *f, st);
    if (!from || static_cast<uint64_t>(st.st_size) != old.size || mtime_of(st) != old.mtime_ns || st.st_ino != old.ino)
        throw Error(ErrorCode::destination, "'" + path + "' changed at the receiver during its update; send it again");
    ParentDirCache dirs(tree);
    Applied a;
    const bool whole = r.ranges.size() == 1 && r.ranges[0].offset == 0 && r.ranges[0].length == f->entry.size &&
                       old.size == f->entry.size;
    if (whole) {
        // Same content: the old inode stays (nothing to copy, no moment without the file).
        if (::fchmod(from.get(), f->entry.mode & 0777) != 0) throw_errno(ErrorCode::destination, "cannot set the mode of '" + path + "'");
        if (::futimens(from.get(), FileTimes(f->entry.mtime_ns).t) != 0)
            throw_errno(ErrorCode::destination, "cannot set the mtime of '" + path + "'");
        if (sync && ::fsync(from.get()) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + path + "'");
        files.mark_verified(*f, 0, f->entry.size);
        files.set_complete(*f);
        return {.bytes = f->entry.size, .complete = true};
    }
    UniqueFd to = open_temp_file(dirs, *f);
    for (const wire::Extent& x : r.ranges) {
        a.bytes += copy_range(from.get(), to.get(), x.offset, x.length, path);
        // Marked once copied: the stream whose block completes the file renames it at once.
        if (files.mark_verified(*f, x.offset, x.length)) a.complete = true;
    }
    if (a.complete) {
        finish_file(dirs, *f, to.get(), sync);
        if (f->journaled) journal::remove(dirs.get(f->parent), f->temp); // blocks that arrived before
        files.set_complete(*f);
    }
    return a;
}

} // namespace sluice
