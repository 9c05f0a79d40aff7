#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/io/aligned_buffer.hpp"
#include "core/io/file_times.hpp"
#include "core/io/sys_error.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "core/checksum/xxh3.hpp"
#include "recv/store/journal.hpp"
#include "recv/store/sparse_holes.hpp"

namespace sluice {

RecvFile& file_for_block(FileTable& files, const wire::BlockPrefix& p, uint64_t len) {
    RecvFile* f = files.find(p.file_id);
    if (!f && p.file_id < files.size()) // announced, and its slab given back: complete
        throw Error(ErrorCode::protocol, "BLOCK for file id " + std::to_string(p.file_id) + ", which is already complete");
    if (!f)
        throw Error(ErrorCode::protocol,
                    "BLOCK for file id " + std::to_string(p.file_id) + " that the manifest did not announce");
    if (f->entry.kind != wire::EntryKind::file)
        throw Error(ErrorCode::protocol, "BLOCK for '" + f->entry.path + "', which is not a regular file");
    if (p.offset > f->entry.size || len > f->entry.size - p.offset || len == 0)
        throw Error(ErrorCode::protocol, "BLOCK [" + std::to_string(p.offset) + ", +" + std::to_string(len) + ") lies outside '" +
                                             f->entry.path + "' of " + std::to_string(f->entry.size) + " bytes");
    check_inside_data(*f, p.offset, len);
    files.claim(*f, p.offset, len);
    return *f;
}

UniqueFd open_unnamed_file(ParentDirCache& dirs, RecvFile& f, bool& refused) {
    int dir = dirs.get(f.parent);
    UniqueFd fd(::openat(dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (fd) {
        f.unnamed = true;
        return fd;
    }
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
        throw_errno(ErrorCode::destination, "cannot create '" + f.entry.path + "'");
    refused = true; // the file system has no O_TMPFILE: said in the stats
    return fd;
}

namespace {

// Gives the verified unnamed (O_TMPFILE) inode of f its final name. linkat never replaces, so
// an older file already under that name is replaced the way a temporary file is: linked under
// the temporary name first, then renamed over it (atomic for readers of the final name).
// taken: the caller holds the older file (its name is known to be there), so the link under
// the final name, which would fail with EEXIST, is not tried; an update's replaced files
// paid that failed linkat and a failed unlinkat of a temporary name no run had left.
void link_into_place(int dir, RecvFile& f, int fd, DirReplacer* replacer, bool taken) {
    const std::string& path = f.entry.path;
    auto link_as = [&](const std::string& name) {
        if (::linkat(fd, "", dir, name.c_str(), AT_EMPTY_PATH) == 0) return 0;
        if (errno != EPERM && errno != ENOENT) return errno;
        // Without CAP_DAC_READ_SEARCH, AT_EMPTY_PATH is refused; the /proc link is not.
        std::string self = "/proc/self/fd/" + std::to_string(fd);
        return ::linkat(AT_FDCWD, self.c_str(), dir, name.c_str(), AT_SYMLINK_FOLLOW) == 0 ? 0 : errno;
    };
    int err = taken ? EEXIST : link_as(f.name);
    if (err == EEXIST) {
        err = link_as(f.temp);
        if (err == EEXIST) { // a temporary file an earlier run left
            ::unlinkat(dir, f.temp.c_str(), 0);
            err = link_as(f.temp);
        }
        if (err == 0) put_in_place(dir, f.temp, f.name, path, "file", replacer);
    }
    if (err != 0) throw_errno(ErrorCode::destination, "cannot link '" + path + "' into place", err);
}

} // namespace

UniqueFd open_temp_file(ParentDirCache& dirs, const RecvFile& f) {
    int dir = dirs.get(f.parent);
    UniqueFd fd(::openat(dir, f.temp.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) throw_errno(ErrorCode::destination, "cannot create '" + f.entry.path + "'");
    return fd;
}

void finish_file(ParentDirCache& dirs, RecvFile& f, int fd, bool sync, FileTable& files) {
    const std::string& path = f.entry.path;
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_errno(ErrorCode::destination, "cannot stat '" + path + "'");
    // A temporary file left by an earlier run may be longer than the file now is.
    if (static_cast<uint64_t>(st.st_size) != f.entry.size && ::ftruncate(fd, static_cast<off_t>(f.entry.size)) != 0)
        throw_errno(ErrorCode::destination, "cannot set the size of '" + path + "'");
    // Set-id and sticky bits from the network are dropped: a transfer must not mint setuid files.
    if (::fchmod(fd, f.entry.mode & 0777) != 0) throw_errno(ErrorCode::destination, "cannot set the mode of '" + path + "'");
    if (::futimens(fd, FileTimes(f.entry.mtime_ns).t) != 0)
        throw_errno(ErrorCode::destination, "cannot set the mtime of '" + path + "'");
    if (sync && ::fsync(fd) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + path + "'");
    int dir = dirs.get(f.parent);
    // The old version's inode, held so that the rename does not free (and discard) its blocks
    // on this thread (inode_reaper.hpp). Not there any more, or not openable: the rename frees it.
    UniqueFd old;
    if (f.replaces) old.reset(::openat(dir, f.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (f.unnamed) {
        link_into_place(dir, f, fd, files.dir_replacer(), static_cast<bool>(old));
    } else {
        put_in_place(dir, f.temp, f.name, path, "file", files.dir_replacer());
    }
    if (old) files.reaper().retire(std::move(old));
}

namespace {

// --verify: reads the file back from the device (O_DIRECT: not from the page cache; the kernel
// writes dirty pages back first) and checks every block against the sender's checksum.
void verify_from_disk(RecvContext& ctx, ParentDirCache& dirs, RecvFile& f) {
    int dir = dirs.get(f.parent);
    UniqueFd fd(::openat(dir, f.temp.c_str(), O_RDONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) fd.reset(::openat(dir, f.temp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)); // no O_DIRECT here
    if (!fd) throw_errno(ErrorCode::destination, "cannot reopen '" + f.entry.path + "' to verify it");
    uint64_t largest = 0;
    for (auto& s : f.sums) largest = std::max(largest, s[1]);
    // A block may start and end inside a page (docs/protocol.md, "Block edges"): O_DIRECT reads
    // whole pages, so the pages around it are read and the block taken from among them.
    AlignedBuffer buf((largest + 4095) / 4096 * 4096 + 4096);
    for (auto& [off, len, sum] : f.sums) {
        const uint64_t start = off / 4096 * 4096;
        const size_t skew = static_cast<size_t>(off - start), need = skew + static_cast<size_t>(len);
        const size_t want = (need + 4095) / 4096 * 4096;
        size_t got = 0;
        while (got < need) {
            ssize_t n = ::pread(fd.get(), buf.data() + got, want - got, static_cast<off_t>(start + got));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw_errno(ErrorCode::destination, "cannot read back '" + f.entry.path + "'");
            if (n == 0) break;
            got += static_cast<size_t>(n);
        }
        if (got < need || xxh3_64(buf.data() + skew, len) != sum) {
            // The journal would otherwise keep vouching for the bad range in every later run;
            // without it the failed transfer removes the temporary file too.
            if (f.journaled) journal::remove(dir, f.temp);
            f.journaled = false;
            throw Error(ErrorCode::integrity, "'" + f.entry.path + "' read back from disk differs from what was sent at offset " +
                                                  std::to_string(off) + " (--verify); the next run sends it again whole");
        }
        ctx.bytes_verified_from_disk.fetch_add(len, std::memory_order_relaxed);
        if (ctx.still_working) ctx.still_working(); // a large last file's read-back is work the sender waits for
    }
}

} // namespace

void block_verified(RecvContext& ctx, ParentDirCache& dirs, RecvFile& f, int fd, uint64_t offset, uint64_t length,
                    uint64_t checksum) {
    bool complete;
    // Recorded before the range is marked, so whoever completes the file sees every checksum.
    if ((ctx.verify || f.keep_sums) && fd >= 0) ctx.files.record_checksum(f, offset, length, checksum);
    if (fd < 0) {
        complete = ctx.files.mark_verified(f, offset, length, {}, true);
    } else {
        complete = ctx.files.mark_verified(f, offset, length, [&](bool first) {
            if (ctx.sync && ::fdatasync(fd) != 0) throw_errno(ErrorCode::destination, "cannot fsync '" + f.entry.path + "'");
            int dir = dirs.get(f.parent);
            try {
                if (first) journal::create(dir, f.temp, f.entry.size, f.entry.mtime_ns);
                journal::append(dir, f.temp, f.entry.size, f.entry.mtime_ns, offset, length, checksum);
            } catch (const Error& e) {
                // Name the user's file, not our hidden journal beside it.
                throw Error(e.code(), "cannot record progress of '" + f.entry.path + "' (" + e.what() + ")", e.cause());
            }
        }, true);
    }
    if (!complete) return;
    if (fd >= 0) {
        if (ctx.verify) verify_from_disk(ctx, dirs, f);
        finish_file(dirs, f, fd, ctx.sync, ctx.files);
        if (f.journaled) journal::remove(dirs.get(f.parent), f.temp);
        if (ctx.still_working) ctx.still_working();
        if (f.keep_sums && ctx.sums_cache) ctx.sums_cache->keep(f);
    }
    ctx.files.set_complete(f);
    ctx.files_completed.fetch_add(1, std::memory_order_relaxed);
    if (ctx.progress) ctx.progress->files_done.fetch_add(1, std::memory_order_relaxed);
    if (ctx.file_completed) ctx.file_completed();
}

void block_failed(RecvContext& ctx, RecvFile& f, uint64_t offset, uint64_t length) {
    ctx.files.disown(f, offset, length);
    ctx.block_failed(f, offset, length);
}

} // namespace sluice
