// Picks the receive path a data stream runs; the errors every path ends a stream with.
#include "recv/paths/stream_receiver.hpp"

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

Error stream_went_silent(unsigned index, int idle_timeout_ms) {
    return Error(ErrorCode::network,
                 "no data from the sender on stream " + std::to_string(index) + " for " + std::to_string(idle_timeout_ms / 1000) +
                     " s",
                 ErrorCause::timed_out);
}

Error stream_cut_short(unsigned index, std::string_view where) {
    return Error(ErrorCode::network,
                 "sender closed data stream " + std::to_string(index) + " in the middle of " + std::string(where),
                 ErrorCause::peer_closed);
}

} // namespace sluice
