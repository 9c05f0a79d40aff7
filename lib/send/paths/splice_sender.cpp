// Send path "splice": the frame prefix goes out with IORING_OP_SEND, then the block's pages
// travel file -> pipe -> socket by reference through linked IORING_OP_SPLICE pairs, so the
// data never enters user space. One submit carries a whole block (up to kMaxOps SQEs).
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "core/io/pipe.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "send/paths/block_sender.hpp"

namespace sluice {

namespace {

constexpr unsigned kMaxOps = 33; // one send + 16 splice pairs

constexpr int kPipeBytes = 1 << 20; // pipe-max-size on most systems

enum class Op : uint8_t { send_prefix, file_to_pipe, pipe_to_socket };

class SpliceSender final : public BlockSender {
public:
    explicit SpliceSender(int sock) : BlockSender(sock), pipe_(kPipeBytes), ring_(64) {}
    const char* name() const override { return "splice"; }

    void send(const Segment& seg, bool more, const Segment*) override {
        const int fd = reader_.open(*seg.file);
        unsigned char* prefix = prefix_; // a member: the send of it may be in flight when an error unwinds
        frame_prefix(seg, prefix);

        size_t prefix_left = sizeof prefix_;
        const uint64_t file_start = seg.file->file_offset(seg.offset);
        uint64_t file_pos = file_start;
        const uint64_t file_end = file_pos + seg.length;
        uint64_t in_pipe = 0; // spliced from the file, not yet to the socket
        uint64_t to_socket = seg.length;

        while (prefix_left || to_socket) {
            unsigned n = 0, t = 0;
            // Linked: a short or failed step cancels the rest, which are redone next round.
            // The prefix's SEND waits for socket room by polling, which SO_SNDTIMEO does not
            // bound: a link timeout does. The splices to the socket run in io-wq workers and
            // block like the system call, so SO_SNDTIMEO bounds each step of their progress
            // (EAGAIN below). Reads from the source are our own work and are not bounded.
            // One getsockopt per block (the prefix goes once): what the receiver has taken so far.
            const uint64_t acked = prefix_left ? bytes_acked(sock_) : 0;
            {
                auto chain = ring_.chain(kMaxOps + 1);
                if (prefix_left) {
                    steps_[n].tag = static_cast<uint64_t>(Op::send_prefix);
                    ring_.send(steps_[n++], sock_, prefix + sizeof prefix_ - prefix_left, prefix_left, MSG_NOSIGNAL | MSG_MORE);
                    ring_.link_timeout(prefix_timeout_, idle_ts_);
                    t = 1;
                }
                const unsigned sock_flags_more = SPLICE_F_MOVE | SPLICE_F_MORE;
                const unsigned sock_flags_last = SPLICE_F_MOVE | (more ? SPLICE_F_MORE : 0);
                if (in_pipe) {
                    bool last = file_pos == file_end;
                    steps_[n].tag = static_cast<uint64_t>(Op::pipe_to_socket);
                    ring_.splice(steps_[n++], pipe_.read_fd(), -1, sock_, -1, static_cast<unsigned>(in_pipe),
                                 last ? sock_flags_last : sock_flags_more);
                }
                for (uint64_t planned = file_pos; planned < file_end && n + 2 <= kMaxOps;) {
                    unsigned part = static_cast<unsigned>(std::min<uint64_t>(pipe_.size(), file_end - planned));
                    steps_[n].tag = static_cast<uint64_t>(Op::file_to_pipe);
                    ring_.splice(steps_[n++], fd, static_cast<int64_t>(planned), pipe_.write_fd(), -1, part, SPLICE_F_MOVE);
                    planned += part;
                    steps_[n].tag = static_cast<uint64_t>(Op::pipe_to_socket);
                    ring_.splice(steps_[n++], pipe_.read_fd(), -1, sock_, -1, part,
                                 planned == file_end ? sock_flags_last : sock_flags_more);
                }
            }
            for (unsigned i = 0; i < n; ++i)
                while (steps_[i].busy()) ring_.wait();
            bool timed_out = false;
            if (t) {
                while (prefix_timeout_.busy()) ring_.wait();
                // Fired (ok), but the receiver took data meanwhile: a slow link, not a silent
                // receiver; the prefix is sent again next round.
                timed_out = prefix_timeout_.outcome() == Completion::Outcome::ok && bytes_acked(sock_) == acked;
            }

            for (unsigned i = 0; i < n; ++i) {
                const Completion& c = steps_[i];
                const Op op = static_cast<Op>(c.tag);
                // EAGAIN from a request to the blocking socket is SO_SNDTIMEO passing (an io-wq
                // splice blocks like a system call); SEND never returns it.
                if (op != Op::file_to_pipe && c.outcome() == Completion::Outcome::retry && c.error() == EAGAIN) timed_out = true;
                if (c.outcome() == Completion::Outcome::cancelled || c.outcome() == Completion::Outcome::retry) continue;
                if (c.outcome() == Completion::Outcome::failed) fail(seg, op, c.error());
                const uint64_t r = static_cast<uint64_t>(c.result());
                switch (op) {
                case Op::send_prefix: prefix_left -= static_cast<size_t>(r); break;
                case Op::file_to_pipe:
                    if (r == 0) throw_source_shrank(*seg.file, file_start, seg.length, file_pos - file_start);
                    file_pos += r;
                    in_pipe += r;
                    break;
                case Op::pipe_to_socket:
                    in_pipe -= r;
                    to_socket -= r;
                    break;
                }
            }
            if (timed_out) receiver_stopped_reading("data stream lost while sending '" + seg.file->rel + "'");
        }
    }

private:
    [[noreturn]] void fail(const Segment& seg, Op op, int err) {
        if (op == Op::file_to_pipe) throw_errno(ErrorCode::source, "cannot read source '" + seg.file->path + "'", err);
        throw_errno(ErrorCode::network, "data stream lost while sending '" + seg.file->rel + "'", err);
    }

    Pipe pipe_;
    unsigned char prefix_[32];
    Completion steps_[kMaxOps]; // tag: the Op
    Completion prefix_timeout_;
    // After the pipe, prefix and completions its requests use: torn down (cancelling them) first.
    Ring ring_;
};

} // namespace

std::unique_ptr<BlockSender> make_splice_sender(int sock) { return std::make_unique<SpliceSender>(sock); }

} // namespace sluice
