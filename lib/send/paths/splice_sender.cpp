// Send path "splice": the frame prefix goes out with IORING_OP_SEND, then the block's pages
// travel file -> pipe -> socket by reference through linked IORING_OP_SPLICE pairs, so the
// data never enters user space. One submit carries a whole block (up to kMaxOps SQEs).
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "core/io/pipe.hpp"
#include "core/io/sys_error.hpp"
#include "send/paths/block_sender.hpp"

namespace sluice {

namespace {

constexpr unsigned kMaxOps = 33; // one send + 16 splice pairs
constexpr int kPipeBytes = 1 << 20; // pipe-max-size on most systems

enum class Op : uint8_t { send_prefix, file_to_pipe, pipe_to_socket };

class SpliceSender final : public BlockSender {
public:
    explicit SpliceSender(int sock) : BlockSender(sock), ring_(64), pipe_(kPipeBytes) {}
    const char* name() const override { return "splice"; }

    void send(const Segment& seg, bool more) override {
        const int fd = reader_.open(*seg.file);
        unsigned char prefix[32];
        frame_prefix(seg, prefix);

        size_t prefix_left = sizeof prefix;
        uint64_t file_pos = seg.file->file_offset(seg.offset);
        const uint64_t file_end = file_pos + seg.length;
        uint64_t in_pipe = 0;  // spliced from the file, not yet to the socket
        uint64_t to_socket = seg.length;

        while (prefix_left || to_socket) {
            std::array<Op, kMaxOps> ops;
            std::array<io_uring_sqe*, kMaxOps> sqes;
            unsigned n = 0;
            auto queue = [&](Op op, io_uring_sqe* sqe) {
                io_uring_sqe_set_data64(sqe, n);
                ops[n] = op;
                sqes[n] = sqe;
                ++n;
            };
            if (prefix_left) {
                io_uring_sqe* sqe = ring_.next_sqe();
                io_uring_prep_send(sqe, sock_, prefix + sizeof prefix - prefix_left, prefix_left,
                                   MSG_NOSIGNAL | MSG_MORE);
                queue(Op::send_prefix, sqe);
            }
            const unsigned sock_flags_more = SPLICE_F_MOVE | SPLICE_F_MORE;
            const unsigned sock_flags_last = SPLICE_F_MOVE | (more ? SPLICE_F_MORE : 0);
            if (in_pipe) {
                io_uring_sqe* sqe = ring_.next_sqe();
                bool last = file_pos == file_end;
                io_uring_prep_splice(sqe, pipe_.read_fd(), -1, sock_, -1, static_cast<unsigned>(in_pipe),
                                     last ? sock_flags_last : sock_flags_more);
                queue(Op::pipe_to_socket, sqe);
            }
            for (uint64_t planned = file_pos; planned < file_end && n + 2 <= kMaxOps;) {
                unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(pipe_.size(), file_end - planned));
                io_uring_sqe* sqe = ring_.next_sqe();
                io_uring_prep_splice(sqe, fd, static_cast<int64_t>(planned), pipe_.write_fd(), -1, chunk, SPLICE_F_MOVE);
                queue(Op::file_to_pipe, sqe);
                planned += chunk;
                sqe = ring_.next_sqe();
                io_uring_prep_splice(sqe, pipe_.read_fd(), -1, sock_, -1, chunk,
                                     planned == file_end ? sock_flags_last : sock_flags_more);
                queue(Op::pipe_to_socket, sqe);
            }
            // Link the chain: a short or failed step cancels the rest, which are redone next round.
            // The ring holds more than kMaxOps entries, so no SQE was submitted early and the
            // pointers are still ours to flag.
            for (unsigned i = 0; i + 1 < n; ++i) sqes[i]->flags |= IOSQE_IO_LINK;
            std::array<int, kMaxOps> res{};
            ring_.submit_and_reap(std::span<int>(res.data(), n));

            for (unsigned i = 0; i < n; ++i) {
                int r = res[i];
                if (r == -ECANCELED || r == -EINTR || r == -EAGAIN) continue;
                if (r < 0) fail(seg, ops[i], -r);
                switch (ops[i]) {
                case Op::send_prefix: prefix_left -= static_cast<size_t>(r); break;
                case Op::file_to_pipe:
                    if (r == 0) throw Error(ErrorCode::source, "source '" + seg.file->path + "' shrank while being sent");
                    file_pos += static_cast<uint64_t>(r);
                    in_pipe += static_cast<uint64_t>(r);
                    break;
                case Op::pipe_to_socket:
                    in_pipe -= static_cast<uint64_t>(r);
                    to_socket -= static_cast<uint64_t>(r);
                    break;
                }
            }
        }
    }

private:
    [[noreturn]] void fail(const Segment& seg, Op op, int err) {
        if (op == Op::file_to_pipe) throw_errno(ErrorCode::source, "cannot read source '" + seg.file->path + "'", err);
        throw_errno(ErrorCode::network, "data stream lost while sending '" + seg.file->rel + "'", err);
    }

    Ring ring_;
    Pipe pipe_;
};

} // namespace

std::unique_ptr<BlockSender> make_splice_sender(int sock) { return std::make_unique<SpliceSender>(sock); }

} // namespace sluice
