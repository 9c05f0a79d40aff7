// Picks the receive path a data stream runs.
#include "recv/paths/stream_receiver.hpp"

namespace sluice {

std::unique_ptr<StreamReceiver> make_recv_write_receiver(int sock, unsigned index, RecvContext& ctx, bool discard);
std::unique_ptr<StreamReceiver> make_direct_receiver(int sock, unsigned index, RecvContext& ctx);
std::unique_ptr<StreamReceiver> make_splice_receiver(int sock, unsigned index, RecvContext& ctx);

std::unique_ptr<StreamReceiver> make_stream_receiver(RecvPath path, int sock, unsigned index, RecvContext& ctx) {
    switch (path) {
    case RecvPath::splice: return make_splice_receiver(sock, index, ctx);
    case RecvPath::recv_write: return make_recv_write_receiver(sock, index, ctx, false);
    case RecvPath::discard: return make_recv_write_receiver(sock, index, ctx, true);
    case RecvPath::direct: return make_direct_receiver(sock, index, ctx);
    }
    return nullptr;
}

} // namespace sluice
