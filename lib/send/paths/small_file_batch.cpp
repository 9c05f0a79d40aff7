#include "send/paths/small_file_batch.hpp"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/checksum/xxh3.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

namespace {
constexpr size_t kPrefix = wire::kFrameHeaderBytes + wire::kBlockPrefixBytes;

// cachestat(2) (Linux 6.5; not in older headers): how much of a file range is in the page cache.
constexpr long kSysCachestat = 451;
struct CachestatRange {
    uint64_t off, len;
};
struct Cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
} // namespace

bool SmallFileBatch::fully_cached(int fd, uint64_t length) {
    if (!cachestat_works_) return true;
    CachestatRange r{0, length};
    Cachestat cs{};
    if (::syscall(kSysCachestat, fd, &r, &cs, 0) != 0) {
        cachestat_works_ = false; // an older kernel: files are left cached, as before
        return true;
    }
    return cs.nr_cache >= (length + 4095) / 4096;
}

void SmallFileBatch::add(const Segment& seg) {
    wire::BlockPrefix p;
    p.file_id = seg.file->file_id;
    p.offset = 0;
    // A file this read brings in from the disk goes out of the buffer (its bytes are copied
    // there anyway, for the checksum) and its pages are dropped at once: read in cold, they
    // would otherwise fill memory at a transfer's full size. A file that was cached stays so.
    const bool cold = !fully_cached(reader_.open(*seg.file), seg.length);
    if (seg.length <= kInlineBytes || cold) {
        if (used_ + kPrefix + seg.length > buf_.size()) flush(true);
        unsigned char* at = buf_.data() + used_;
        reader_.read_whole(*seg.file, at + kPrefix);
        if (cold) {
            ::posix_fadvise(reader_.open(*seg.file), 0, 0, POSIX_FADV_DONTNEED); // advice only
            ++dropped_;
        }
        p.checksum = xxh3_64(at + kPrefix, seg.length);
        wire::encode_block_prefix(at, p, static_cast<uint32_t>(seg.length));
        used_ += kPrefix + seg.length;
        return;
    }
    reader_.read_whole(*seg.file, scratch_.data());
    p.checksum = xxh3_64(scratch_.data(), seg.length);
    if (used_ + kPrefix > buf_.size()) flush(true);
    wire::encode_block_prefix(buf_.data() + used_, p, static_cast<uint32_t>(seg.length));
    used_ += kPrefix;
    flush(true);
    send_file_data(seg);
}

// If the file changed since it was read, the receiver's checksum check fails the block and it
// is sent again; a file that shrank cannot fill its frame and ends the transfer.
void SmallFileBatch::send_file_data(const Segment& seg) {
    const int fd = reader_.open(*seg.file);
    off_t off = static_cast<off_t>(seg.file->file_offset(0));
    uint64_t left = seg.length;
    while (left) {
        ssize_t n = ::sendfile(sock_, fd, &off, static_cast<size_t>(left));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            if (errno == EIO || errno == EINVAL || errno == ENOMEM || errno == EOVERFLOW)
                throw_errno(ErrorCode::source, "cannot read source '" + seg.file->path + "'");
            throw_send_errno("data stream lost while sending '" + seg.file->rel + "'", errno);
        }
        if (n == 0) throw_source_shrank(*seg.file, seg.file->file_offset(0), seg.length, seg.length - left);
        left -= static_cast<uint64_t>(n);
    }
}

void SmallFileBatch::flush(bool more) {
    size_t done = 0;
    while (done < used_) {
        ssize_t n = ::send(sock_, buf_.data() + done, used_ - done, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_send_errno("data stream lost while sending small files", errno);
        done += static_cast<size_t>(n);
    }
    used_ = 0;
}

} // namespace sluice
