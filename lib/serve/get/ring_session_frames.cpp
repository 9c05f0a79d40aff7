// A get session's transfer on the ring: the control connection's frames (ring_session.hpp),
// and which bytes go out: the file minus the ranges the receiver already has (resume), cut
// into blocks, each summed on the pool before a stream takes it; RESEND puts a block back.
#include <algorithm>
#include <cstring>

#include "core/wire/codec.hpp"
#include "serve/get/ring_session.hpp"
#include "sluice/sluice.hpp"

namespace sluice::serve {

namespace {

constexpr uint64_t kBlock = kDefaultBlockSize;  // as `sluice send` cuts a large file
constexpr size_t kMaxResends = 65536;           // the receiver's own bound on blocks asked again

} // namespace

void RingSession::send_manifest(Link& l) {
    wire::ManifestPage page;
    page.seq = 0;
    wire::ManifestEntry e;
    e.file_id = 0;
    e.size = s_.size;
    e.mtime_ns = s_.mtime_ns;
    e.mode = s_.mode & 07777;
    e.kind = wire::EntryKind::file;
    e.path = s_.name;
    page.entries.push_back(std::move(e));
    wire::encode_manifest(l.out, page);
    wire::encode_manifest_end(l.out, wire::ManifestEnd{1, 1, s_.size});
    manifest_sent_ = true;
}

void RingSession::on_control_bytes(std::vector<unsigned char>& in) {
    size_t at = 0;
    while (!ended_ && in.size() - at >= wire::kFrameHeaderBytes) {
        wire::FrameHeader h;
        try {
            h = wire::decode_frame_header(wire::Span(in.data() + at, wire::kFrameHeaderBytes));
        } catch (const Error& e) {
            return fail(ErrorCode::protocol, std::string("the client's receiver: ") + e.what());
        }
        if (h.length > (64u << 10))
            return fail(ErrorCode::protocol, "the client's receiver sent a " + std::string(wire::frame_type_name(h.type)) +
                                                 " frame of " + std::to_string(h.length) +
                                                 " bytes (a get on the serve ring takes at most 65536)");
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
    case F::manifest_ack: {
        wire::ManifestAck a = wire::decode_manifest_ack(p);
        if (acked_ || a.seq != 0) return fail(ErrorCode::protocol, "the client's receiver acknowledged a page never sent");
        acked_ = true;
        plan(a.verified);
        return;
    }
    case F::working: return;
    case F::resend: {
        wire::ByteRange r = wire::decode_resend(p);
        if (r.file_id != 0 || r.length == 0 || r.offset > s_.size || r.length > s_.size - r.offset || r.length > wire::kMaxBlockData)
            return fail(ErrorCode::protocol, "the client's receiver asked again for bytes outside the file, or more than a block");
        if (resend_.size() >= kMaxResends) return fail(ErrorCode::integrity, "more than 65536 blocks asked for again");
        resend_.emplace_back(r.offset, r.offset + r.length);
        return;
    }
    case F::all_verified:
        if (!acked_) return fail(ErrorCode::protocol, "ALL_VERIFIED before the manifest was acknowledged");
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

// The file minus what the receiver has verified already, as [off, end) ranges in order.
void RingSession::plan(const std::vector<wire::ByteRange>& verified) {
    std::vector<std::pair<uint64_t, uint64_t>> have;
    for (const auto& r : verified) {
        if (r.file_id != 0 || r.offset > s_.size || r.length > s_.size - r.offset)
            return fail(ErrorCode::protocol, "the client's receiver reported verified bytes outside the file");
        if (r.length) have.emplace_back(r.offset, r.offset + r.length);
    }
    std::sort(have.begin(), have.end());
    uint64_t at = 0;
    for (const auto& [b, e] : have) {
        if (b > at) needed_.emplace_back(at, b);
        at = std::max(at, e);
    }
    if (at < s_.size) needed_.emplace_back(at, s_.size);
    cursor_off_ = needed_.empty() ? 0 : needed_[0].first;
}

bool RingSession::next_range(uint64_t most, uint64_t& off, uint64_t& len) {
    if (!resend_.empty()) { // a range asked again larger than a block goes in blocks
        off = resend_.front().first;
        len = std::min(most, resend_.front().second - off);
        if (off + len == resend_.front().second)
            resend_.pop_front();
        else
            resend_.front().first += len;
        return true;
    }
    if (cursor_ >= needed_.size()) return false;
    off = cursor_off_;
    len = std::min(most - cursor_off_ % most, needed_[cursor_].second - cursor_off_);
    cursor_off_ += len;
    if (cursor_off_ == needed_[cursor_].second && ++cursor_ < needed_.size()) cursor_off_ = needed_[cursor_].first;
    return true;
}

// Sums ahead of the streams, at most one block per stream and one more: what a session holds
// does not grow with the file. (Encrypted, each stream's block is summed as it is sealed:
// ring_session_tls.cpp.)
void RingSession::queue_sums() {
    if (!acked_ || ended_ || encrypted_) return;
    while (ready_.size() + sums_in_flight_ < 1u + s_.streams) {
        SumJob j{slot_, gen_, s_.file.get(), 0, 0, 0, 0};
        if (!next_range(kBlock, j.offset, j.length)) return;
        ++sums_in_flight_;
        pool_.push(j);
    }
}

void RingSession::on_sum(const SumJob& j, int64_t now_ms) {
    now_ms_ = now_ms;
    --sums_in_flight_;
    if (j.seal) return on_sealed(j);
    if (ended_) return;
    if (j.err) return fail(ErrorCode::source, "reading '" + s_.name + "' to send it: " + std::strerror(j.err));
    ready_.push_back(Block{j.offset, j.length, j.sum});
    deadline_ms_ = std::max(deadline_ms_, now_ms + s_.idle_ms); // the disk's time is not the client's
    drive();
}

} // namespace sluice::serve
