// Send path "sendfile": prefix with send(MSG_MORE), data with sendfile(2). No user copy, one
// syscall per up-to-2 GiB; a blocking call on the stream's own thread.
#include <sys/sendfile.h>
#include <sys/socket.h>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "send/paths/block_sender.hpp"

namespace sluice {

namespace {

class SendfileSender final : public BlockSender {
public:
    explicit SendfileSender(int sock) : BlockSender(sock) {}
    const char* name() const override { return "sendfile"; }

    void send(const Segment& seg, bool more, const Segment*) override {
        const int fd = reader_.open(*seg.file);
        unsigned char prefix[32];
        frame_prefix(seg, prefix);
        send_prefix(prefix);
        off_t off = static_cast<off_t>(seg.file->file_offset(seg.offset));
        uint64_t left = seg.length;
        while (left) {
            ssize_t n = ::sendfile(sock_, fd, &off, left);
            if (n < 0) {
                if (errno == EINTR) continue;
                throw_send_errno("data stream lost while sending '" + seg.file->rel + "'", errno);
            }
            if (n == 0) throw_source_shrank(*seg.file, seg.file->file_offset(seg.offset), seg.length, seg.length - left);
            left -= static_cast<uint64_t>(n);
        }
        (void)more;
    }

private:
    void send_prefix(const unsigned char* p) {
        size_t done = 0;
        while (done < 32) {
            ssize_t n = ::send(sock_, p + done, 32 - done, MSG_NOSIGNAL | MSG_MORE);
            if (n < 0) {
                if (errno == EINTR) continue;
                throw_send_errno("data stream lost", errno);
            }
            done += static_cast<size_t>(n);
        }
    }
};

} // namespace

std::unique_ptr<BlockSender> make_sendfile_sender(int sock) { return std::make_unique<SendfileSender>(sock); }

} // namespace sluice
