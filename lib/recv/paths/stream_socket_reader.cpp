// Reading a data stream's bytes from its socket (stream_socket_reader.hpp).
#include "recv/paths/stream_socket_reader.hpp"

#include <sys/socket.h>

#include <cerrno>

#include "core/io/sys_error.hpp"

namespace sluice {

StreamSocketReader::StreamSocketReader(int sock, unsigned index, RecvContext& ctx, Ring& ring,
                                       std::function<void(Completion&)> other, const tls::LinkKeys* keys,
                                       size_t record_capacity)
    : sock_(sock), index_(index), ctx_(ctx), ring_(ring), other_(std::move(other)), wait_(sock, ctx) {
    if (keys) records_.emplace(keys->rx, "data stream " + std::to_string(index), record_capacity);
}

// Plain bytes of the stream: straight from the socket, or opened from its TLS records into p
// (the record reader receives through recv_between).
void StreamSocketReader::read(unsigned char* p, size_t n, bool spare) {
    if (!records_) {
        recv_between(p, n, n);
        return;
    }
    records_->read(p, n, spare, [this](unsigned char* c, size_t least, size_t most) { return recv_between(c, least, most); });
}

// Takes what the socket already holds, up to n bytes, with one non-blocking read. Between
// back-to-back small files the next frame usually is there, and the ring's way (a recv and
// its linked timeout, two completions, often a sleep and a wakeup) costs far more than one
// plain system call; when nothing is queued the attempt costs one EAGAIN.
size_t StreamSocketReader::take_queued(unsigned char* p, size_t n) {
    if (n == 0) return 0; // a zero-length recv returns 0, which means the peer closed
    for (;;) {
        ssize_t r = ::recv(sock_, p, n, MSG_DONTWAIT);
        if (r > 0) {
            credit_arrival(ctx_, static_cast<size_t>(r));
            return static_cast<size_t>(r);
        }
        if (r == 0) throw stream_cut_short(index_);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        throw_errno(ErrorCode::network, "data stream " + std::to_string(index_));
    }
}

// Receives at least least and at most most bytes to p (least is owed: the rest of a frame
// the sender began), handing the ring's other completions to the path while it waits.
size_t StreamSocketReader::recv_between(unsigned char* p, size_t least, size_t most) {
    size_t got = take_queued(p, most);
    while (got < least) {
        // With a low-water mark the read returns once the mark is met (polled first: an
        // immediate attempt would return the few bytes already there); the loop sets the
        // next mark. Without one, MSG_WAITALL lets the kernel gather the bytes.
        const MarkedWait::Plan plan = wait_.arm(least - got);
        {
            auto chain = ring_.chain(2);
            ring_.recv(recv_, sock_, p + got, least - got, plan.early ? 0 : MSG_WAITALL, plan.marked);
            ring_.link_timeout(recv_timeout_, *plan.timeout);
        }
        ring_.submit();
        while (recv_.busy() || recv_timeout_.busy()) {
            Completion& done = ring_.wait();
            if (!owns(done)) other_(done);
        }
        switch (recv_.outcome()) {
        case Completion::Outcome::ok: break;
        case Completion::Outcome::retry: continue;
        case Completion::Outcome::cancelled:
            if (wait_.wait_again(plan)) continue; // the mark's deadline, or a slice of silence
            throw stream_went_silent(index_, ctx_);
        case Completion::Outcome::failed:
            throw_errno(ErrorCode::network, "data stream " + std::to_string(index_), recv_.error());
        }
        if (recv_.result() == 0) throw stream_cut_short(index_);
        wait_.took(plan, static_cast<size_t>(recv_.result()));
        got += static_cast<size_t>(recv_.result());
    }
    return got;
}

} // namespace sluice
