// Picks the receive path a data stream runs; how every path waits on its socket for a frame,
// and the errors it ends a stream with.
#include "recv/paths/stream_receiver.hpp"

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"

namespace sluice {

std::unique_ptr<StreamReceiver> make_recv_write_receiver(int sock, unsigned index, RecvContext& ctx, bool discard,
                                                         const tls::LinkKeys* keys);
std::unique_ptr<StreamReceiver> make_direct_receiver(int sock, unsigned index, RecvContext& ctx, const tls::LinkKeys* keys);
std::unique_ptr<StreamReceiver> make_splice_receiver(int sock, unsigned index, RecvContext& ctx);

std::unique_ptr<StreamReceiver> make_stream_receiver(RecvPath path, int sock, unsigned index, RecvContext& ctx,
                                                     const tls::LinkKeys* keys) {
    // Encrypted streams open their records into the direct path's aligned buffers
    // (kRecordsDirectRecvPath), or where recv_write parses them (kRecordsRecvPath) for any
    // other path asked.
    if (keys && path == RecvPath::direct) return make_direct_receiver(sock, index, ctx, keys);
    if (keys) return make_recv_write_receiver(sock, index, ctx, path == RecvPath::discard, keys);
    switch (path) {
    case RecvPath::splice: return make_splice_receiver(sock, index, ctx);
    case RecvPath::recv_write: return make_recv_write_receiver(sock, index, ctx, false, nullptr);
    case RecvPath::discard: return make_recv_write_receiver(sock, index, ctx, true, nullptr);
    case RecvPath::direct: return make_direct_receiver(sock, index, ctx, nullptr);
    }
    return nullptr;
}

Error stream_went_silent(unsigned index, const RecvContext& ctx) {
    // Said only once the rest of the transfer stood still too (silence_excused()).
    return Error(ErrorCode::network,
                 "no data from the sender on stream " + std::to_string(index) + " for " + timeout_text(ctx.idle_timeout_ms) +
                     " (sender " + (ctx.sender.empty() ? std::string("unknown") : ctx.sender) +
                     "), and nothing else of the transfer moved either (no data on its other streams, no frame on the "
                     "control connection) within the idle timeout",
                 ErrorCause::timed_out);
}

Error stream_cut_short(unsigned index, std::string_view where) {
    return Error(ErrorCode::network,
                 "sender closed data stream " + std::to_string(index) + " in the middle of " + std::string(where),
                 ErrorCause::peer_closed);
}

void recv_patiently(int sock, std::span<unsigned char> data, unsigned index, const RecvContext& ctx, const std::string& what) {
    size_t done = 0;
    StreamQuiet quiet; // counted from this read's start: the stream's last bytes came just before
    while (done < data.size()) {
        ssize_t r = ::recv(sock, data.data() + done, data.size() - done, MSG_WAITALL);
        if (r > 0) {
            done += static_cast<size_t>(r);
            credit_arrival(ctx, static_cast<size_t>(r));
            quiet.heard();
            continue;
        }
        if (r == 0) throw stream_cut_short(index);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (quiet.wait_again(ctx)) continue;
            throw stream_went_silent(index, ctx);
        }
        throw_errno(ErrorCode::network, what);
    }
}

void set_stream_slices(int sock, const RecvContext& ctx) {
    const int ms = quiet_slice_ms(ctx.idle_timeout_ms);
    if (ms <= 0) return; // no idle timeout: the socket's own (none) stays
    timeval tv{ms / 1000, (ms % 1000) * 1000};
    // Receives only: what this side sends keeps the idle timeout the session set.
    if (::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
        throw_errno(ErrorCode::internal, "cannot set the receive timeout of data stream socket " + std::to_string(sock));
}

} // namespace sluice
