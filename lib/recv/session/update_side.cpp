#include "recv/session/update_side.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/checksum/block_sums.hpp"
#include "core/io/sys_error.hpp"
#include "core/io/file_times.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "recv/store/journal.hpp"

namespace sluice {

namespace {

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
    cache_.set_block_size(p.block_size);
}

std::optional<wire::BlockSums> UpdateSide::offer(const DestTree& tree, const RecvFile& f, const std::function<void()>& working) {
    if (!active() || f.entry.sparse || f.entry.size == 0) return std::nullopt;
    // A small file of one block is sent whole: at best one block would be reused (a file only
    // touched), and offering it costs a hash on each side before the page's ack, which holds
    // back every file of the page (the minor set's 1% update: 64 files hashed one after the
    // other, ~60 ms before the ack). With --checksum the sums are how content is compared.
    if (!params_.checksum && f.entry.size <= std::min<uint64_t>(params_.block_size, kWholeBytes)) return std::nullopt;
    struct stat st {};
    UniqueFd fd = open_old(tree, f, st);
    if (!fd || st.st_size == 0) return std::nullopt;
    const uint64_t size = static_cast<uint64_t>(st.st_size), b = params_.block_size;
    const uint64_t blocks = (size + b - 1) / b;
    // One frame: 24 bytes and 8 per block (8 TiB of old file at 8 MiB blocks).
    if (24 + blocks * 8 > wire::kMaxControlPayload) return std::nullopt;
    wire::BlockSums s{.file_id = f.entry.file_id, .old_size = size, .sums = {}};
    Old old{size, ns_of(st.st_mtim), st.st_ino, {}};
    if (auto cached = params_.checksum ? std::nullopt : cache_.load(st, b)) {
        ++sums_cached_;
        s.sums = std::move(*cached);
        if (f.keep_sums) old.sums = s.sums;
        offered_[f.entry.file_id] = std::move(old);
        return s;
    }
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    bool refused = false;
    BlockSumsResult r = block_sums(fd.get(), 0, size, b, hash_threads_for(blocks), working, refused);
    if (refused && !mapped_refused_) {
        mapped_refused_ = true;
        fallback_ += std::string(fallback_.empty() ? "" : "; ") +
                     "update: an old version could not be mapped to hash it: hashed through pread (slower)";
    }
    if (r.status != BlockSumsResult::Status::hashed) return std::nullopt; // shortened meanwhile: sent whole instead
    ++sums_hashed_;
    s.sums = std::move(r.sums);
    if (f.keep_sums) old.sums = s.sums;
    offered_[f.entry.file_id] = std::move(old);
    return s;
}

// The unchanged blocks go into the temporary file as a reflink where the file system shares
// extents (FICLONERANGE: XFS, btrfs; nothing is copied), otherwise read from the old version
// and written with O_DIRECT. Not with copy_file_range: on this ext4 it copied 4 GiB in 12.7 s
// (330 MB/s, dirtying the page cache), 4x slower than receiving the same bytes over loopback.
uint64_t UpdateSide::copy_range(int from, int to, int to_direct, uint64_t offset, uint64_t length, const std::string& path) {
    if (!clone_refused_) {
        file_clone_range r{.src_fd = from, .src_offset = offset, .src_length = length, .dest_offset = offset};
        if (::ioctl(to, FICLONERANGE, &r) == 0) return length;
        if (errno != EINVAL) { // EINVAL: this range's edges; the next may clone
            clone_refused_ = true;
            fallback_ = "update: the destination cannot share extents (FICLONERANGE: " + std::string(std::strerror(errno)) +
                        "): unchanged blocks copied (read, O_DIRECT write)";
        }
    }
    if (!copy_buf_) copy_buf_.emplace(kCopyBytes);
    unsigned char* buf = copy_buf_->data();
    for (uint64_t done = 0; done < length;) {
        const uint64_t at = offset + done;
        const size_t want = static_cast<size_t>(std::min<uint64_t>(kCopyBytes, length - done));
        size_t got = 0;
        while (got < want) {
            ssize_t n = ::pread(from, buf + got, want - got, static_cast<off_t>(at + got));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw_errno(ErrorCode::destination, "cannot read the old version of '" + path + "'");
            if (n == 0) throw Error(ErrorCode::destination, "the old version of '" + path + "' became shorter during the update");
            got += static_cast<size_t>(n);
        }
        // Whole pages with O_DIRECT (ranges start on a block edge); a last partial page, at
        // the end of the old file, through the page cache.
        const size_t pages = (at % 4096 == 0 && to_direct >= 0) ? want / 4096 * 4096 : 0;
        write_all(to_direct, buf, pages, at, path);
        write_all(to, buf + pages, want - pages, at + pages, path);
        done += want;
    }
    return length;
}

void UpdateSide::write_all(int fd, const unsigned char* p, size_t n, uint64_t at, const std::string& path) {
    while (n) {
        ssize_t k = ::pwrite(fd, p, n, static_cast<off_t>(at));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) throw_errno(ErrorCode::destination, "cannot write '" + path + "'", k == 0 ? ENOSPC : errno);
        p += k;
        n -= static_cast<size_t>(k);
        at += static_cast<uint64_t>(k);
    }
}

void UpdateSide::record_reused(FileTable& files, RecvFile& f, const Old& old, uint64_t offset, uint64_t length, uint64_t block) {
    if (!f.keep_sums || old.sums.empty()) return;
    // REUSE ranges are whole blocks (the sender merges equal blocks), the last one maybe short.
    for (uint64_t off = offset; off < offset + length; off += block) {
        const uint64_t i = off / block;
        if (off % block != 0 || i >= old.sums.size()) return; // not a whole-block layout: keep() will not store it
        files.record_checksum(f, off, std::min(block, offset + length - off), old.sums[i]);
    }
}

UpdateSide::Applied UpdateSide::apply(const DestTree& tree, FileTable& files, const wire::Reuse& r, bool sync) {
    RecvFile* f = files.find(r.file_id);
    auto it = offered_.find(r.file_id);
    if (!f || it == offered_.end())
        throw Error(ErrorCode::protocol, "REUSE for file id " + std::to_string(r.file_id) + ", whose old version was not offered");
    const Old old = std::move(it->second);
    offered_.erase(it);
    const std::string& path = f->entry.path;
    const uint64_t limit = std::min(old.size, f->entry.size);
    for (const wire::Extent& x : r.ranges)
        if (x.offset + x.length > limit)
            throw Error(ErrorCode::protocol, "REUSE range [" + std::to_string(x.offset) + ", +" + std::to_string(x.length) +
                                                 ") of '" + path + "' lies past its old or new size");
    struct stat st {};
    UniqueFd from = open_old(tree, *f, st);
    if (!from || static_cast<uint64_t>(st.st_size) != old.size || ns_of(st.st_mtim) != old.mtime_ns || st.st_ino != old.ino)
        throw Error(ErrorCode::destination, "'" + path + "' changed at the receiver during its update; send it again");
    ParentDirCache dirs(tree);
    Applied a;
    // Same content: the old inode stays (nothing to copy, no moment without the file), unless
    // it has other names: its new mode, mtime, owner and attributes would show under those too
    // (names outside the transfer, which must not change), so it is copied as a changed one is.
    const bool whole = r.ranges.size() == 1 && r.ranges[0].offset == 0 && r.ranges[0].length == f->entry.size &&
                       old.size == f->entry.size && st.st_nlink == 1;
    if (whole) {
        if (::fchmod(from.get(), f->entry.mode & 0777) != 0) throw_errno(ErrorCode::destination, "cannot set the mode of '" + path + "'");
        if (::futimens(from.get(), FileTimes(f->entry.mtime_ns).t) != 0)
            throw_errno(ErrorCode::destination, "cannot set the mtime of '" + path + "'");
        if (sync && ::fsync(from.get()) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + path + "'");
        record_reused(files, *f, old, 0, f->entry.size, params_.block_size);
        files.mark_verified(*f, 0, f->entry.size);
        if (f->keep_sums) cache_.keep(*f);
        files.set_complete(*f);
        return {.bytes = f->entry.size, .complete = true};
    }
    UniqueFd to = open_temp_file(dirs, *f);
    // A file system without O_DIRECT gets every byte through the page cache (direct = -1).
    UniqueFd direct(::openat(dirs.get(f->parent), f->temp.c_str(), O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC));
    for (const wire::Extent& x : r.ranges) {
        a.bytes += copy_range(from.get(), to.get(), direct.get(), x.offset, x.length, path);
        record_reused(files, *f, old, x.offset, x.length, params_.block_size);
        // Marked once copied: the stream whose block completes the file renames it at once.
        if (files.mark_verified(*f, x.offset, x.length)) a.complete = true;
    }
    if (a.complete) {
        finish_file(dirs, *f, to.get(), sync, files);
        if (f->journaled) journal::remove(dirs.get(f->parent), f->temp); // blocks that arrived before
        if (f->keep_sums) cache_.keep(*f);
        files.set_complete(*f);
    }
    return a;
}

} // namespace sluice
