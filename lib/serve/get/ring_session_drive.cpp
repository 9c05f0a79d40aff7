// A get session's transfer on the ring: writing (ring_session.hpp). Blocks to idle streams
// (clear: the BLOCK prefix, then the file's bytes by sendfile), STREAM_END and TRANSFER_END
// when all is verified, the control connection's pages, and --get-rate-limit's token bucket.
// Every socket is non-blocking; a send that would wait arms a one-shot POLLOUT.
#include <sys/sendfile.h>
#include <sys/socket.h>

#include <algorithm>

#include "core/wire/codec.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/ring_session.hpp"

namespace sluice::serve {

bool RingSession::flush(Link& l) {
    if (l.wr_c.busy()) return false;
    if (l.tls && l.st == Link::St::ready) return flush_tls(l);
    while (l.out_off < l.out.size() || l.has_block) {
        ssize_t n;
        if (l.out_off < l.out.size()) {
            n = ::send(l.fd.get(), l.out.data() + l.out_off, l.out.size() - l.out_off,
                       MSG_DONTWAIT | MSG_NOSIGNAL | (l.has_block ? MSG_MORE : 0));
            if (n > 0) l.out_off += static_cast<size_t>(n);
        } else {
            const uint64_t may = allowance();
            if (may == 0) return false; // paced: the next tick drives this stream again
            off_t off = static_cast<off_t>(l.blk_off);
            n = ::sendfile(l.fd.get(), l.blk_fd, &off, static_cast<size_t>(std::min<uint64_t>({l.blk_end - l.blk_off, 1u << 30, may})));
            if (n > 0) {
                l.blk_off += static_cast<uint64_t>(n);
                sent_bytes_ += static_cast<uint64_t>(n);
                if (s_.rate) spend(static_cast<uint64_t>(n));
            }
            if (n == 0) return fail(ErrorCode::source, "a file got shorter while it was sent"), false;
        }
        if (!sent(l, n)) return false;
        if (l.out_off == l.out.size()) {
            l.out.clear();
            l.out_off = 0;
        }
        if (l.has_block && l.out.empty() && l.blk_off == l.blk_end) {
            l.has_block = false;
            ++l.blocks;
        }
    }
    return true;
}

uint64_t RingSession::allowance() {
    if (!s_.rate) return ~uint64_t{0};
    const double rate = static_cast<double>(s_.rate), burst = std::max(rate / 4, 65536.0);
    tokens_ = std::min(burst, tokens_ + rate * static_cast<double>(now_ms_ - refilled_ms_) / 1000);
    refilled_ms_ = now_ms_;
    if (tokens_ >= 1) return static_cast<uint64_t>(tokens_);
    paced_ = true;
    return 0;
}

// The control connection: manifest pages as the socket takes them, and what else is queued.
void RingSession::drive_control(Link& ctl) {
    if (ctl.st == Link::St::auth) {
        flush(ctl);
        return;
    }
    if (ctl.st != Link::St::ready) return;
    do send_pages(ctl);
    while (flush(ctl) && !manifest_ended_ && !ended_);
}

void RingSession::drive() {
    queue_sums();
    uint64_t blocks = 0, bytes = 0;
    bool streams_ended = true;
    for (size_t i = 1; i < links_.size() && !ended_; ++i) {
        Link& l = *links_[i];
        if (l.tls) {
            drive_sealed(l);
            blocks += l.blocks;
            bytes += l.bytes;
            streams_ended = streams_ended && l.end_queued && !l.sealing && !l.sealed->pending(); // end_queued: sealed is there
            continue;
        }
        while (!ended_ && l.st == Link::St::ready && flush(l)) {
            if (!ready_.empty()) { // the next summed block goes to the first idle stream
                const Block b = ready_.front();
                ready_.pop_front();
                ahead_bytes_ -= b.len;
                unsigned char pre[wire::kFrameHeaderBytes + wire::kBlockPrefixBytes];
                wire::encode_block_prefix(pre, wire::BlockPrefix{b.file, b.off, b.sum}, static_cast<uint32_t>(b.len));
                l.out.insert(l.out.end(), pre, pre + sizeof pre);
                l.has_block = true;
                l.blk_fd = files_[b.file].fd;
                l.blk_off = b.off;
                l.blk_end = b.off + b.len;
                l.bytes += b.len;
                queue_sums();
            } else if (all_verified_ && !l.end_queued) {
                wire::encode_stream_end(l.out, wire::StreamEnd{l.blocks, l.bytes});
                l.end_queued = true;
            } else {
                break;
            }
        }
        blocks += l.blocks;
        bytes += l.bytes;
        streams_ended = streams_ended && l.end_queued && l.out.empty();
    }
    if (ended_ || links_.empty()) return;
    Link& ctl = *links_[0];
    if (all_verified_ && !transfer_end_ && streams_ended && links_.size() == 1u + s_.streams) {
        wire::encode_transfer_end(ctl.out, wire::TransferEnd{s_.streams, blocks, bytes});
        transfer_end_ = true;
    }
    drive_control(ctl);
    for (size_t i = 1; i < links_.size() && !ended_; ++i)
        if (links_[i]->st == Link::St::auth) flush(*links_[i]);
}

} // namespace sluice::serve
