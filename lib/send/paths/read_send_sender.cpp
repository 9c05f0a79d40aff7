// Send path "read_send": the baseline every other path is measured against. The block is
// read into a user buffer (a kernel -> user copy) and sent from it (a user -> kernel copy).
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <vector>

#include "core/io/sys_error.hpp"
#include "core/io/socket.hpp"
#include "send/paths/block_sender.hpp"

namespace sluice {

namespace {

class ReadSendSender final : public BlockSender {
public:
    explicit ReadSendSender(int sock) : BlockSender(sock), buf_(1 << 20) {}
    const char* name() const override { return "read_send"; }

    void send(const Segment& seg, bool more, const Segment*) override {
        const int fd = reader_.open(*seg.file);
        unsigned char prefix[32];
        frame_prefix(seg, prefix);
        send_bytes(prefix, sizeof prefix, true);
        uint64_t done = 0;
        while (done < seg.length) {
            size_t want = static_cast<size_t>(std::min<uint64_t>(buf_.size(), seg.length - done));
            ssize_t n = ::pread(fd, buf_.data(), want, static_cast<off_t>(seg.file->file_offset(seg.offset + done)));
            if (n < 0) {
                if (errno == EINTR) continue;
                throw_errno(ErrorCode::source, "cannot read source '" + seg.file->path + "'");
            }
            if (n == 0) throw_source_shrank(*seg.file, seg.file->file_offset(seg.offset), seg.length, done);
            done += static_cast<uint64_t>(n);
            send_bytes(buf_.data(), static_cast<size_t>(n), more || done < seg.length);
        }
    }

private:
    void send_bytes(const unsigned char* p, size_t len, bool more) {
        size_t done = 0;
        while (done < len) {
            ssize_t n = ::send(sock_, p + done, len - done, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
            if (n < 0) {
                if (errno == EINTR) continue;
                throw_send_errno("data stream lost", errno);
            }
            done += static_cast<size_t>(n);
        }
    }
    std::vector<unsigned char> buf_;
};

} // namespace

std::unique_ptr<BlockSender> make_read_send_sender(int sock) { return std::make_unique<ReadSendSender>(sock); }

} // namespace sluice
