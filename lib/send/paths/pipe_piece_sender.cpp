#include "send/paths/pipe_piece_sender.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

PieceSource::PieceSource(int in_fd) : in_(in_fd) {
    // A bigger input pipe lets the producer run ahead of us by a whole piece.
    small_pipe_ = grow_pipe(in_, static_cast<int>(wire::kMaxPiece), "the input");
}

size_t PieceSource::fill(Pipe& p, size_t max, const std::function<bool()>& stop) {
    if (!fallback_.empty()) return copy_fill(p, max);
    for (;;) {
        pollfd pf{in_, POLLIN, 0};
        int r = ::poll(&pf, 1, 200);
        if (r < 0 && errno != EINTR) throw_errno(ErrorCode::source, "poll on the input");
        if (stop()) return 0;
        if (r > 0) break;
    }
    size_t filled = 0;
    while (filled < max) {
        ssize_t n = ::splice(in_, nullptr, p.write_fd(), nullptr, max - filled, SPLICE_F_MOVE | (filled ? SPLICE_F_NONBLOCK : 0));
        if (n > 0) {
            filled += static_cast<size_t>(n);
            continue;
        }
        if (n == 0) break; // end of input
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break; // nothing more ready, or the piece's pipe is full: ship it
        if (errno == EINVAL && filled == 0) {
            fallback_ = "pipe input copied through a buffer: the input does not support splice";
            return copy_fill(p, max);
        }
        throw_errno(ErrorCode::source, "reading the pipe input");
    }
    return filled;
}

// Inputs without splice (a terminal, some character devices): one read, one write to the pipe.
size_t PieceSource::copy_fill(Pipe& p, size_t max) {
    if (!bounce_owner_) bounce_owner_ = std::make_unique<AlignedBuffer>(wire::kMaxPiece);
    for (;;) {
        ssize_t n = ::read(in_, bounce_owner_->data(), std::min(max, bounce_owner_->size()));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno(ErrorCode::source, "reading the pipe input");
        size_t done = 0;
        while (done < static_cast<size_t>(n)) {
            ssize_t w = ::write(p.write_fd(), bounce_owner_->data() + done, static_cast<size_t>(n) - done);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) throw_errno(ErrorCode::internal, "filling a piece pipe");
            done += static_cast<size_t>(w);
        }
        return static_cast<size_t>(n);
    }
}

void send_piece(int sock, Pipe& p, uint64_t pipe_id, uint64_t offset, size_t length) {
    unsigned char head[wire::kFrameHeaderBytes + wire::kBlockPrefixBytes];
    // Pipe pieces carry no checksum (docs/protocol.md): computing one would need the copy
    // through user space that pipe mode exists to avoid.
    wire::encode_block_prefix(head, {pipe_id, offset, 0}, static_cast<uint32_t>(length));
    size_t sent = 0;
    while (sent < sizeof head) {
        ssize_t n = ::send(sock, head + sent, sizeof head - sent, MSG_MORE | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_send_errno("data stream", errno);
        sent += static_cast<size_t>(n);
    }
    while (length) {
        ssize_t n = ::splice(p.read_fd(), nullptr, sock, nullptr, length, SPLICE_F_MOVE);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw_send_errno("data stream", n == 0 ? EPIPE : errno);
        length -= static_cast<size_t>(n);
    }
}

} // namespace sluice
