#include "send/paths/direct_block_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/io/page_cache.hpp"
#include "core/io/sys_error.hpp"
#include "send/paths/source_reader.hpp"

namespace sluice {

namespace {
constexpr uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }
} // namespace

DirectBlockReader::DirectBlockReader() {
    const RingFeatures& f = probe_ring_features();
    if (f.op_send || f.op_read) ring_.emplace(4);
    can_read_ahead_ = ring_ && f.op_read;
}

DirectBlockReader::~DirectBlockReader() {
    stop(); // a read still in flight (an error unwinding) is cancelled before its buffer goes
    if (ahead_buf_ >= 0) ahead_seg_.file->let_go();
    close();
}

void DirectBlockReader::stop() {
    ring_.reset();
    can_read_ahead_ = false;
}

void DirectBlockReader::close() {
    fd_.reset();
    if (file_) file_->let_go();
    file_ = nullptr;
}

bool DirectBlockReader::open(const SourceFile& f) {
    if (file_ == &f) return true;
    close();
    UniqueFd fd = SourceReader::open_checked(f);
    const int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_DIRECT) != 0) {
        works_ = false;
        fallback_ = std::string("O_DIRECT refused by the source's file system (") + std::strerror(errno) +
                    "): blocks not cached read through the page cache";
        return false;
    }
    fd_ = std::move(fd);
    f.hold(); // the caller's segment holds f until read() returns
    file_ = &f;
    return true;
}

bool DirectBlockReader::read(const Segment& seg, const Segment* next) {
    const bool direct = works_ && read_cold(seg, next);
    if (!direct) drop_ahead(); // the caller's path may read the same block
    return direct;
}

bool DirectBlockReader::fits(const Segment& seg, bool count) {
    if (seg.file->file_offset(seg.offset) % kAlign != 0) {
        if (count) ++unaligned_;
        return false;
    }
    if (seg.length > kMaxBlockBytes) {
        if (count && fallback_.empty())
            fallback_ = "blocks of " + std::to_string(seg.length) + " bytes are larger than the " +
                        std::to_string(kMaxBlockBytes) + "-byte O_DIRECT buffer: blocks not cached read through the page cache";
        return false;
    }
    return true;
}

bool DirectBlockReader::cold(const Segment& seg, int fd) {
    const std::optional<bool> cached = range_cached(fd, seg.file->file_offset(seg.offset), seg.length);
    if (!cached) {
        works_ = false;
        fallback_ = "cachestat(2) unavailable (Linux < 6.5): blocks not cached read through the page cache";
        return false;
    }
    return !*cached;
}

int DirectBlockReader::free_buffer(uint64_t length) {
    int b = 0;
    while (b == cur_ || b == lent_ || b == ahead_buf_) ++b;
    size_t need = kHead + round_up(length, kAlign);
    // A block from kHugeFrom up (the encrypted streams' 1 MiB blocks) gets a whole huge page
    // all the same: its O_DIRECT read then pins one folio and goes out as one block-layer
    // segment, where 4 KiB pages cost the pinning a page walk each (gup_fast_fallback: 9% of
    // the encrypted sender's samples, perf h18q) and split a 1 MiB read in two requests
    // (virtio-blk takes 254 segments per request).
    if (length >= kHugeFrom) need = std::max(need, AlignedBuffer::kHugePage);
    if (!bufs_[b] || bufs_[b]->size() < need) bufs_[b].emplace(need);
    return b;
}

void DirectBlockReader::start_ahead(const Segment& seg) {
    if (!can_read_ahead_ || !works_ || ahead_buf_ >= 0 || !fits(seg, false)) return;
    const SourceFile& f = *seg.file;
    // The next block of the file whose fd is open (the large files' case: a stream's blocks
    // are mostly of one file) is read on that fd: no open, fstat and fcntl per block. The
    // block's own read checks the file afterwards on the same fd, as for any block.
    if (file_ == &f) {
        if (!cold(seg, fd_.get())) return;
        queue_ahead(seg, fd_.get());
        ++ahead_reused_;
        return;
    }
    // Another file: its own fd, as the current block's stays open until that block is checked,
    // and a read ahead that is not taken is dropped without touching it. A guess that fails
    // (the file gone or changed since it was listed) is no error yet: it is not queued, and the
    // block's own read reports it in its turn, after the blocks before it went out.
    UniqueFd fd;
    try {
        fd = SourceReader::open_checked(f);
    } catch (const Error&) {
        return;
    }
    const int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_DIRECT) != 0) return; // read_cold says why, on its own fd
    if (!cold(seg, fd.get())) return;
    queue_ahead(seg, fd.get());
    ahead_fd_ = std::move(fd);
}

void DirectBlockReader::queue_ahead(const Segment& seg, int fd) {
    const int b = free_buffer(seg.length);
    ring_->read(ahead_read_, fd, bufs_[b]->data() + kHead, static_cast<unsigned>(round_up(seg.length, kAlign)),
                seg.file->file_offset(seg.offset));
    ring_->submit();
    seg.file->hold();
    ahead_seg_ = seg;
    ahead_buf_ = b;
}

bool DirectBlockReader::take_ahead(const Segment& seg) {
    if (ahead_buf_ < 0) return false;
    if (ahead_seg_.file != seg.file || ahead_seg_.offset != seg.offset || ahead_seg_.length != seg.length) {
        drop_ahead();
        return false;
    }
    while (ahead_read_.busy()) ring_->wait();
    if (ahead_read_.outcome() != Completion::Outcome::ok) {
        drop_ahead(); // read again on this thread, which reports its error with the file's name
        return false;
    }
    if (ahead_fd_) {
        close();
        fd_ = std::move(ahead_fd_);
        file_ = ahead_seg_.file; // the read ahead's hold is now the fd's
    } else {
        ahead_seg_.file->let_go(); // read on fd_, whose file (the same) is held already
    }
    cur_ = ahead_buf_;
    ahead_buf_ = -1;
    return true;
}

void DirectBlockReader::drop_ahead() {
    if (ahead_buf_ < 0) return;
    while (ahead_read_.busy()) ring_->wait();
    ahead_fd_.reset();
    ahead_seg_.file->let_go();
    ahead_buf_ = -1;
}

bool DirectBlockReader::read_cold(const Segment& seg, const Segment* next) {
    const SourceFile& f = *seg.file;
    const uint64_t at = f.file_offset(seg.offset);
    uint64_t got = 0;
    if (take_ahead(seg)) {
        got = std::min<uint64_t>(static_cast<uint64_t>(ahead_read_.result()), seg.length);
        ++ahead_used_;
    } else {
        // Whether the block is cached is asked of the fd it would be read from: opening is the
        // same cost either way, and a cached block's fd is kept for the file's next block.
        if (!fits(seg, true) || !open(f) || !cold(seg, fd_.get())) return false;
        cur_ = free_buffer(seg.length);
    }
    // The next block's read goes to the disk before this one is hashed and sent.
    if (next) start_ahead(*next);
    if (!read_rest(f, at, seg.length, got)) return false;
    if (got < seg.length) throw_source_shrank(f, at, seg.length, got);
    // The bytes read are the file as listed (a file that grew or was rewritten since is an
    // error here, never sent torn).
    SourceReader::check_unchanged(fd_.get(), f);
    ++blocks_;
    bytes_ += seg.length;
    return true;
}

bool DirectBlockReader::read_rest(const SourceFile& f, uint64_t at, uint64_t length, uint64_t& got) {
    // Whole kAlign units: the last may read past the file's end, which the buffer has room for.
    const uint64_t want = round_up(length, kAlign);
    if (got % kAlign != 0) return true; // the file ended inside the read ahead's last unit
    while (got < length) {
        const ssize_t n = ::pread(fd_.get(), data() + got, want - got, static_cast<off_t>(at + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && got == 0) {
            // The file system took O_DIRECT at open but not this read: cold blocks go through
            // the page cache from here on, and this one goes on the caller's path.
            works_ = false;
            fallback_ = "O_DIRECT reads refused (EINVAL) by the source's file system: blocks not cached read through the page cache";
            close();
            return false;
        }
        if (n < 0) throw_errno(ErrorCode::source, "cannot read source '" + f.path + "'");
        if (n == 0) break;
        got += static_cast<uint64_t>(n);
        if (got % kAlign != 0) break; // the file ended inside this unit
    }
    if (got > length) got = length; // the file grew past the block: check_unchanged says so
    return true;
}

} // namespace sluice
