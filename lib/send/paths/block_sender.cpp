#include "send/paths/block_sender.hpp"

#include "core/io/socket.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

std::unique_ptr<BlockSender> make_splice_sender(int sock);
std::unique_ptr<BlockSender> make_sendfile_sender(int sock);
std::unique_ptr<BlockSender> make_read_send_sender(int sock);
std::unique_ptr<BlockSender> make_zc_sender(int sock);

void BlockSender::frame_prefix(const Segment& seg, unsigned char out[32]) {
    wire::BlockPrefix p;
    p.file_id = seg.file->file_id;
    p.offset = seg.offset;
    p.checksum = reader_.checksum(*seg.file, seg.offset, seg.length);
    wire::encode_block_prefix(out, p, static_cast<uint32_t>(seg.length));
}

SendPathChoice choose_send_path(SendPath wanted, bool mptcp) {
    if (wanted == SendPath::splice) {
        const RingFeatures& f = probe_ring_features();
        if (!f.op_splice || !f.op_send)
            return {SendPath::sendfile,
                    "io_uring splice unavailable (no IORING_OP_SPLICE/SEND or io_uring disabled): using sendfile"};
    }
    if (wanted == SendPath::zc) {
        const RingFeatures& f = probe_ring_features();
        if (!f.op_send_zc || !f.op_read_fixed || !f.op_read || !f.op_send)
            return {SendPath::splice, "io_uring SEND_ZC/READ_FIXED unavailable: using splice"};
        if (mptcp) return {SendPath::splice, "--mptcp: MPTCP sockets refuse zero-copy sends (SEND_ZC): using splice"};
    }
    return {wanted, {}};
}

void BlockSender::receiver_stopped_reading(const std::string& where) const {
    throw Error(ErrorCode::network,
                where + ": the receiver took nothing (timed out after " + timeout_text(idle_timeout_ms_) + ")",
                ErrorCause::timed_out);
}

std::unique_ptr<BlockSender> make_block_sender(SendPath path, int sock, int idle_timeout_ms) {
    std::unique_ptr<BlockSender> s;
    switch (path) {
    case SendPath::splice: s = make_splice_sender(sock); break;
    case SendPath::sendfile: s = make_sendfile_sender(sock); break;
    case SendPath::read_send: s = make_read_send_sender(sock); break;
    case SendPath::zc: s = make_zc_sender(sock); break;
    }
    if (s) s->set_idle_timeout(idle_timeout_ms);
    return s;
}

} // namespace sluice
