#include "send/paths/small_file_batch.hpp"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/checksum/xxh3.hpp"
#include "core/io/page_cache.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/tls/record_writer.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

namespace {
constexpr size_t kPrefix = wire::kFrameHeaderBytes + wire::kBlockPrefixBytes;

constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
} // namespace

// One file from its read's queueing until its bytes and prefix are in the buffer.
struct SmallFileBatch::Slot {
    const SourceFile* file = nullptr;
    unsigned char* at = nullptr; // its prefix; the data follows (kAlign-aligned)
    uint64_t length = 0;
    UniqueFd fd;       // open while its read is in flight
    Completion read;   // tag: the slot's index
    bool cold = false; // not cached before this read
    bool direct = false;
    bool pending = false; // read queued, bytes not yet checked and hashed
};

SmallFileBatch::SmallFileBatch(int sock)
    : sock_(sock), buf_(kBufferBytes, AlignedBuffer::Pages::small_first), scratch_(kMaxFileBytes),
      // Every file takes at least two kAlign units of a chunk (its prefix's, its data's).
      slot_count_(kBufferBytes / (2 * kAlign)) {
    if (probe_ring_features().op_read) {
        ring_.emplace(kMaxReads * 2);
    } else {
        fallback_ = "io_uring reads unavailable: small files read one at a time";
    }
    slots_ = std::make_unique<Slot[]>(slot_count_);
    for (size_t i = 0; i < slot_count_; ++i) slots_[i].read.tag = i;
    iov_.reserve(kChunkBytes / (2 * kAlign));
}

std::string SmallFileBatch::reads_line() {
    return "small files (up to " + std::to_string(kMaxFileBytes / 1024) +
           " KiB, sent whole): read once for the checksum; up to " + std::to_string(kInlineBytes / 1024) +
           " KiB sent many per send from a buffer, larger with sendfile; blocks not in the page cache read with "
           "O_DIRECT and sent from that buffer";
}

SmallFileBatch::~SmallFileBatch() {
    // Reads still in flight (an error unwinding) are cancelled and reaped before the buffer
    // they write into goes: the slots' Completions do it, and they go before the ring.
    slots_.reset();
}

bool SmallFileBatch::fully_cached(int fd, uint64_t length) {
    if (!cachestat_works_) return true;
    const auto c = page_cache_counts(fd, 0, length);
    if (!c) {
        cachestat_works_ = false; // an older kernel: files are read as cached ones, as before
        return true;
    }
    // A file with pages dirty or under writeback (just written: an update's changed files) is
    // read through the page cache even where the rest is not cached: an O_DIRECT read of it
    // first writes those pages back and waits for the disk (filemap_write_and_wait_range),
    // which cost the minor set's 1% update more than the reads themselves.
    return c->cached >= c->pages || c->dirty > 0;
}

bool SmallFileBatch::make_direct(int fd) {
    if (!direct_works_) return false;
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0) return true;
    direct_works_ = false;
    fallback_ = std::string("O_DIRECT refused by the source's file system (") + std::strerror(errno) +
                "): files not cached read through the page cache, their pages dropped after";
    return false;
}

void SmallFileBatch::add(const Segment& seg) {
    const SourceFile& f = *seg.file;
    UniqueFd fd = SourceReader::open_checked(f);
    const bool cold = !fully_cached(fd.get(), seg.length);
    if (!cold && seg.length > kInlineBytes) {
        send_cached_large(seg, std::move(fd));
        f.let_go(); // sent: the batch holds a file from add() until its bytes are out
        return;
    }
    unsigned char* at = place(seg.length);
    Slot& s = slots_[next_slot_++ % slot_count_];
    s.file = &f;
    s.at = at;
    s.length = seg.length;
    s.cold = cold;
    s.fd = std::move(fd);
    s.direct = cold && ring_ && f.file_offset(0) % kAlign == 0 && make_direct(s.fd.get());
    s.pending = true;
    if (!ring_) {
        finish_read(s);
        return;
    }
    while (reads_ >= kMaxReads) reap_one();
    queue_read(s);
}

void SmallFileBatch::queue_read(Slot& s) {
    // O_DIRECT reads whole blocks: the last one may fill the buffer past the file's end, up to
    // the next kAlign boundary, which place() left free.
    const size_t len = s.direct ? round_up(s.length, kAlign) : s.length;
    ring_->read(s.read, s.fd.get(), s.at + kPrefix, static_cast<unsigned>(len), s.file->file_offset(0));
    ring_->submit(); // the disk starts now, not when the chunk is waited for
    ++reads_;
}

void SmallFileBatch::reap_one() {
    Completion& c = ring_->wait();
    --reads_;
    finish_read(slots_[c.tag]);
}

// The read of s completed (or, without a ring, has not started): checks it, finishes it with
// pread where it fell short, and hashes the bytes.
void SmallFileBatch::finish_read(Slot& s) {
    const SourceFile& f = *s.file;
    size_t got = 0;
    if (ring_) {
        switch (s.read.outcome()) {
        case Completion::Outcome::ok: got = static_cast<size_t>(s.read.result()); break;
        case Completion::Outcome::retry: queue_read(s); return;
        case Completion::Outcome::cancelled:
            throw Error(ErrorCode::internal, "read of source '" + f.path + "' cancelled");
        case Completion::Outcome::failed:
            if (!s.direct || s.read.error() != EINVAL)
                throw_errno(ErrorCode::source, "cannot read source '" + f.path + "'", s.read.error());
            // The file system took O_DIRECT at open but not this read: read it as a cached one.
            direct_works_ = false;
            fallback_ = "O_DIRECT reads refused (EINVAL) by the source's file system: files not cached read "
                        "through the page cache, their pages dropped after";
            break;
        }
    }
    if (got < s.length) {
        // A short read (a file that shrank, or a read the kernel cut) is finished by pread,
        // which needs no alignment: the fd goes back to reads through the page cache.
        if (s.direct) ::fcntl(s.fd.get(), F_SETFL, ::fcntl(s.fd.get(), F_GETFL) & ~O_DIRECT);
        s.direct = false;
        got += SourceReader::pread_full(s.fd.get(), f, s.at + kPrefix + got, s.length - got, f.file_offset(got));
        if (got < s.length) throw_source_shrank(f, f.file_offset(0), s.length, got);
    }
    SourceReader::check_unchanged(s.fd.get(), f);
    if (s.direct) {
        ++direct_reads_;
        direct_bytes_ += s.length;
    } else if (s.cold) {
        ::posix_fadvise(s.fd.get(), 0, 0, POSIX_FADV_DONTNEED); // advice only
        ++dropped_;
    }
    s.fd.reset();
    wire::BlockPrefix p;
    p.file_id = f.file_id;
    p.offset = 0;
    p.checksum = xxh3_64(s.at + kPrefix, s.length);
    wire::encode_block_prefix(s.at, p, static_cast<uint32_t>(s.length));
    s.pending = false;
}

unsigned char* SmallFileBatch::place(uint64_t length) {
    // A file's data starts on a kAlign boundary with its prefix just before it, and takes whole
    // kAlign units (the tail an O_DIRECT read may write).
    auto end_of = [&](size_t used) { return round_up(used + kPrefix, kAlign) + round_up(length, kAlign); };
    // Slots cannot run out: a file takes at least 2 * kAlign bytes of a chunk, and there is a
    // slot for every 2 * kAlign bytes of the buffer.
    if (chunks_open_ == 0 || end_of(chunks_[(chunk_head_ + chunks_open_ - 1) % kChunks].used) > kChunkBytes) {
        if (chunks_open_ == kChunks) send_oldest(true);
        // Empty (every chunk sent, so no read in flight writes into it): the moment the
        // buffer can drop its pages and take huge ones (kGrowAfter).
        if (chunks_open_ == 0 && !grown_ && carried_ >= kGrowAfter) {
            grown_ = true;
            buf_.prefer_huge(); // advice: small pages still work
        }
        chunks_[(chunk_head_ + chunks_open_) % kChunks] = Chunk{0, next_slot_, 0};
        ++chunks_open_;
    }
    const size_t k = (chunk_head_ + chunks_open_ - 1) % kChunks;
    Chunk& c = chunks_[k];
    carried_ += length;
    const size_t data = round_up(c.used + kPrefix, kAlign);
    c.used = data + round_up(length, kAlign);
    ++c.files;
    return buf_.data() + k * kChunkBytes + data - kPrefix;
}

void SmallFileBatch::send_oldest(bool more) {
    Chunk& c = chunks_[chunk_head_];
    iov_.clear();
    for (size_t i = c.first; i < c.first + c.files; ++i) {
        Slot& s = slots_[i % slot_count_];
        while (s.pending) reap_one();
        iov_.push_back(iovec{s.at, kPrefix + s.length});
    }
    if (records_) {
        for (const iovec& v : iov_) records_->write(static_cast<const unsigned char*>(v.iov_base), v.iov_len);
        iov_.clear(); // sent when the writer fills, or by flush()
    }
    size_t first = 0;
    while (first < iov_.size()) {
        msghdr m{};
        m.msg_iov = iov_.data() + first;
        m.msg_iovlen = iov_.size() - first;
        ssize_t n = ::sendmsg(sock_, &m, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_send_errno("data stream lost while sending small files", errno);
        auto left = static_cast<size_t>(n);
        while (first < iov_.size() && left >= iov_[first].iov_len) left -= iov_[first++].iov_len;
        if (left) {
            iov_[first].iov_base = static_cast<unsigned char*>(iov_[first].iov_base) + left;
            iov_[first].iov_len -= left;
        }
    }
    // Sent (or copied into records): the batch lets go of the chunk's files (SourceFile::hold).
    for (size_t i = c.first; i < c.first + c.files; ++i) {
        Slot& s = slots_[i % slot_count_];
        if (s.file) s.file->let_go();
        s.file = nullptr;
    }
    chunk_head_ = (chunk_head_ + 1) % kChunks;
    --chunks_open_;
}

void SmallFileBatch::flush(bool more) {
    while (chunks_open_) send_oldest(chunks_open_ > 1 || more);
    if (records_ && !more) records_->flush();
}

// A cached file above kInlineBytes: read for its checksum, its data sent from the page cache.
// If the file changed since it was read, the receiver's checksum check fails the block and it
// is sent again; a file that shrank cannot fill its frame and ends the transfer.
// Encrypted: read straight into the record slots, hashed there, sealed in place (as
// tls_record_sender.cpp does with blocks), not into scratch_ and copied from it: one copy
// less per byte of these files (issue 18; minor set: 97% of its bytes are in files above
// kInlineBytes).
void SmallFileBatch::read_into_records(const Segment& seg, int fd) {
    const SourceFile& f = *seg.file;
    tls::RecordWriter::Reserved r = records_->reserve(kPrefix, seg.length);
    iovec iov[kMaxFileBytes / tls::kMaxPlain];
    std::copy(r.iov, r.iov + r.records, iov);
    const size_t got = SourceReader::preadv_full(fd, f, iov, r.records, f.file_offset(0));
    if (got < seg.length) throw_source_shrank(f, f.file_offset(0), seg.length, got);
    SourceReader::check_unchanged(fd, f);
    hash_.reset();
    for (size_t k = 0; k < r.records; ++k) hash_.update(r.iov[k].iov_base, r.iov[k].iov_len);
    wire::BlockPrefix p;
    p.file_id = f.file_id;
    p.offset = 0;
    p.checksum = hash_.digest();
    wire::encode_block_prefix(r.head, p, static_cast<uint32_t>(seg.length));
    records_->commit(); // sent by the next flush or when the writer fills
}

void SmallFileBatch::send_cached_large(const Segment& seg, UniqueFd fd) {
    const SourceFile& f = *seg.file;
    flush(true); // the files before it go first
    if (records_ && seg.length <= records_->capacity()) return read_into_records(seg, fd.get());
    const size_t got = SourceReader::pread_full(fd.get(), f, scratch_.data(), seg.length, f.file_offset(0));
    if (got < seg.length) throw_source_shrank(f, f.file_offset(0), seg.length, got);
    SourceReader::check_unchanged(fd.get(), f);
    unsigned char prefix[kPrefix];
    wire::BlockPrefix p;
    p.file_id = f.file_id;
    p.offset = 0;
    p.checksum = xxh3_64(scratch_.data(), seg.length);
    wire::encode_block_prefix(prefix, p, static_cast<uint32_t>(seg.length));
    if (records_) {
        records_->write(prefix, kPrefix);
        records_->write(scratch_.data(), seg.length);
        return; // sent by the next flush or when the writer fills
    }
    for (size_t done = 0; done < kPrefix;) {
        ssize_t n = ::send(sock_, prefix + done, kPrefix - done, MSG_NOSIGNAL | MSG_MORE);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_send_errno("data stream lost while sending small files", errno);
        done += static_cast<size_t>(n);
    }
    off_t off = static_cast<off_t>(f.file_offset(0));
    uint64_t left = seg.length;
    while (left) {
        ssize_t n = ::sendfile(sock_, fd.get(), &off, static_cast<size_t>(left));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            if (errno == EIO || errno == EINVAL || errno == ENOMEM || errno == EOVERFLOW)
                throw_errno(ErrorCode::source, "cannot read source '" + f.path + "'");
            throw_send_errno("data stream lost while sending '" + f.rel + "'", errno);
        }
        if (n == 0) throw_source_shrank(f, f.file_offset(0), seg.length, seg.length - left);
        left -= static_cast<uint64_t>(n);
    }
}

} // namespace sluice
