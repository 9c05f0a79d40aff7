#include "paths/small_file_batch.hpp"

#include <sys/socket.h>

#include <cerrno>

#include "io/sys_error.hpp"
#include "paths/xxh3.hpp"
#include "wire/codec.hpp"

namespace sluice {

namespace {
constexpr size_t kPrefix = wire::kFrameHeaderBytes + wire::kBlockPrefixBytes;
}

void SmallFileBatch::add(const Segment& seg) {
    if (used_ + kPrefix + seg.length > buf_.size()) flush(true);
    unsigned char* at = buf_.data() + used_;
    reader_.read_whole(*seg.file, at + kPrefix);
    wire::BlockPrefix p;
    p.file_id = seg.file->file_id;
    p.offset = 0;
    p.checksum = xxh3_64(at + kPrefix, seg.length);
    wire::encode_block_prefix(at, p, static_cast<uint32_t>(seg.length));
    used_ += kPrefix + seg.length;
}

void SmallFileBatch::flush(bool more) {
    size_t done = 0;
    while (done < used_) {
        ssize_t n = ::send(sock_, buf_.data() + done, used_ - done, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno(ErrorCode::network, "data stream lost while sending small files");
        done += static_cast<size_t>(n);
    }
    used_ = 0;
}

} // namespace sluice
