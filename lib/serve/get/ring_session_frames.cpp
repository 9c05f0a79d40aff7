// A get session's transfer on the ring: the control connection's frames (ring_session.hpp),
// and the blocks cut from the plan (ring_session_manifest.cpp), each summed on the pool before
// a stream takes it; RESEND puts a block back.
#include <algorithm>
#include <cstring>

#include "core/wire/codec.hpp"
#include "serve/get/ring_session.hpp"
#include "sluice/sluice.hpp"

namespace sluice::serve {

namespace {

constexpr uint64_t kBlock = kDefaultBlockSize;  // as `sluice send` cuts a large file
constexpr size_t kMaxResends = 65536;           // the receiver's own bound on blocks asked again
constexpr size_t kMaxAhead = 64;                // blocks summed ahead, however small

} // namespace

void RingSession::on_control_bytes(std::vector<unsigned char>& in) {
    size_t at = 0;
    while (!ended_ && in.size() - at >= wire::kFrameHeaderBytes) {
        wire::FrameHeader h;
        try {
            h = wire::decode_frame_header(wire::Span(in.data() + at, wire::kFrameHeaderBytes));
        } catch (const Error& e) {
            return fail(ErrorCode::protocol, std::string("the client's receiver: ") + e.what());
        }
        if (h.length > kMaxControlFrame)
            return fail(ErrorCode::protocol, "the client's receiver sent a " + std::string(wire::frame_type_name(h.type)) +
                                                 " frame of " + std::to_string(h.length) +
                                                 " bytes (a get on the serve ring takes at most " + std::to_string(kMaxControlFrame) + ")");
        if (in.size() - at < wire::kFrameHeaderBytes + h.length) break;
        try {
            on_frame(h.type, wire::Span(in.data() + at + wire::kFrameHeaderBytes, h.length));
        } catch (const Error& e) {
            return fail(ErrorCode::protocol, std::string("the client's receiver: ") + e.what());
        }
        at += wire::kFrameHeaderBytes + h.length;
    }
    if (!ended_) in.erase(in.begin(), in.begin() + static_cast<long>(at));
}

void RingSession::on_frame(uint8_t type, wire::Span p) {
    using F = wire::FrameType;
    switch (static_cast<F>(type)) {
    case F::manifest_ack: return plan(wire::decode_manifest_ack(p));
    case F::working: return;
    case F::resend: {
        wire::ByteRange r = wire::decode_resend(p);
        // Only a file of a page already planned: its blocks are the only ones sent.
        const bool planned = r.file_id < files_.size() && pages_acked_ > 0 &&
                             (pages_acked_ == page_first_.size() ? r.file_id < next_entry_ : r.file_id < page_first_[pages_acked_]);
        if (!planned || files_[r.file_id].fd < 0 || r.length == 0 || r.offset > files_[r.file_id].size ||
            r.length > files_[r.file_id].size - r.offset || r.length > wire::kMaxBlockData)
            return fail(ErrorCode::protocol, "the client's receiver asked again for bytes outside the files sent, or more than a block");
        if (resend_.size() >= kMaxResends) return fail(ErrorCode::integrity, "more than 65536 blocks asked for again");
        resend_.push_back(Range{static_cast<uint32_t>(r.file_id), r.offset, r.offset + r.length});
        return;
    }
    case F::all_verified:
        if (!manifest_ended_ || pages_acked_ != page_first_.size())
            return fail(ErrorCode::protocol, "ALL_VERIFIED before every manifest page was acknowledged");
        all_verified_ = true;
        return;
    case F::final_status: {
        wire::FinalStatus f = wire::decode_final_status(p);
        if (!transfer_end_) return fail(ErrorCode::protocol, "FINAL_STATUS before TRANSFER_END");
        if (f.status == 0) return finish(0, "");
        return fail(ErrorCode::integrity, "the client's receiver failed: " + f.message, ErrorCause::peer_aborted);
    }
    case F::abort: {
        wire::Abort a = wire::decode_abort(p);
        return fail(ErrorCode::network, "the client's receiver aborted: " + a.message, ErrorCause::peer_aborted);
    }
    default:
        return fail(ErrorCode::protocol,
                    "the client's receiver sent " + std::string(wire::frame_type_name(type)) + " on the control connection of a get");
    }
}

SumJob RingSession::job(const Range& r) const {
    SumJob j;
    j.session = slot_;
    j.gen = gen_;
    j.fd = files_[r.file].fd;
    j.file = files_[r.file].key;
    j.offset = r.off;
    j.length = r.end - r.off;
    j.entry = r.file;
    return j;
}

// Sums ahead of the streams, at most the bytes of one block per stream and one more, and at
// most kMaxAhead blocks (a tree's small files: enough that the streams do not wait for the
// pool's round trip): what a session holds does not grow with the file or the tree.
// (Encrypted, each stream's block is summed as it is sealed: ring_session_tls.cpp.)
void RingSession::queue_sums() {
    if (ended_ || encrypted_) return;
    while (ready_.size() + sums_in_flight_ < kMaxAhead && ahead_bytes_ < (1u + s_.streams) * kBlock) {
        Range r;
        if (!next_range(kBlock, r)) return;
        ++sums_in_flight_;
        ahead_bytes_ += r.end - r.off;
        pool_.push(job(r));
    }
}

void RingSession::on_sum(const SumJob& j, int64_t now_ms) {
    now_ms_ = now_ms;
    --sums_in_flight_;
    if (j.seal) return on_sealed(j);
    if (ended_) return;
    if (j.err) return fail(ErrorCode::source, "reading '" + s_.src.entries[j.entry].path + "' to send it: " + std::strerror(j.err));
    ready_.push_back(Block{j.entry, j.offset, j.length, j.sum});
    deadline_ms_ = std::max(deadline_ms_, now_ms + s_.idle_ms); // the disk's time is not the client's
    drive();
}

} // namespace sluice::serve
