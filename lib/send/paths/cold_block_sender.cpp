#include "send/paths/cold_block_sender.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/checksum/xxh3.hpp"
#include "core/io/page_cache.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/wire/codec.hpp"
#include "send/paths/source_reader.hpp"

namespace sluice {

namespace {
constexpr size_t kPrefix = wire::kFrameHeaderBytes + wire::kBlockPrefixBytes;
constexpr uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }
} // namespace

ColdBlockSender::~ColdBlockSender() { close(); }

void ColdBlockSender::close() {
    fd_.reset();
    if (file_) file_->let_go();
    file_ = nullptr;
}

bool ColdBlockSender::open(const SourceFile& f) {
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
    f.hold(); // the caller's segment holds f until try_send returns
    file_ = &f;
    return true;
}

bool ColdBlockSender::try_send(const Segment& seg, bool more) {
    if (!works_) return false;
    const SourceFile& f = *seg.file;
    const uint64_t at = f.file_offset(seg.offset);
    if (at % kAlign != 0) {
        ++unaligned_;
        return false;
    }
    if (seg.length > kMaxBlockBytes) {
        if (fallback_.empty())
            fallback_ = "blocks of " + std::to_string(seg.length) + " bytes are larger than the " +
                        std::to_string(kMaxBlockBytes) + "-byte O_DIRECT buffer: blocks not cached read through the page cache";
        return false;
    }
    // Whether the block is cached is asked of the fd it would be read from: opening is the
    // same cost either way, and a cached block's fd is kept for the file's next block.
    if (!open(f)) return false;
    const std::optional<bool> cached = range_cached(fd_.get(), at, seg.length);
    if (!cached) {
        works_ = false;
        fallback_ = "cachestat(2) unavailable (Linux < 6.5): blocks not cached read through the page cache";
        return false;
    }
    if (*cached) return false;

    if (!buf_ || buf_->size() < round_up(seg.length, kAlign)) buf_.emplace(round_up(seg.length, kAlign));
    uint64_t got = 0;
    if (!read(f, at, seg.length, got)) return false;
    if (got < seg.length) throw_source_shrank(f, at, seg.length, got);
    // The bytes read are the file as listed (a file that grew or was rewritten since is an
    // error here, never sent torn).
    SourceReader::check_unchanged(fd_.get(), f);

    unsigned char prefix[kPrefix];
    wire::BlockPrefix p;
    p.file_id = f.file_id;
    p.offset = seg.offset;
    p.checksum = xxh3_64(buf_->data(), seg.length);
    wire::encode_block_prefix(prefix, p, static_cast<uint32_t>(seg.length));
    send(prefix, seg.length, more, f);
    ++blocks_;
    bytes_ += seg.length;
    return true;
}

bool ColdBlockSender::read(const SourceFile& f, uint64_t at, uint64_t length, uint64_t& got) {
    // Whole kAlign units: the last may read past the file's end, which the buffer has room for.
    const uint64_t want = round_up(length, kAlign);
    got = 0;
    while (got < length) {
        const ssize_t n = ::pread(fd_.get(), buf_->data() + got, want - got, static_cast<off_t>(at + got));
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

void ColdBlockSender::send(const unsigned char* prefix, uint64_t length, bool more, const SourceFile& f) {
    iovec iov[2] = {{const_cast<unsigned char*>(prefix), kPrefix}, {buf_->data(), static_cast<size_t>(length)}};
    size_t first = 0;
    while (first < 2) {
        msghdr m{};
        m.msg_iov = iov + first;
        m.msg_iovlen = 2 - first;
        const ssize_t n = ::sendmsg(sock_, &m, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_send_errno("data stream lost while sending '" + f.rel + "'", errno);
        auto left = static_cast<size_t>(n);
        while (first < 2 && left >= iov[first].iov_len) left -= iov[first++].iov_len;
        if (left) {
            iov[first].iov_base = static_cast<unsigned char*>(iov[first].iov_base) + left;
            iov[first].iov_len -= left;
        }
    }
}

} // namespace sluice
