// An encrypted get session on the ring (ring_session.hpp): each connection's TLS 1.3 PSK
// handshake stepped on its non-blocking socket, the control connection's frames sealed and
// opened here, and each data stream's blocks sealed into its SealedBlock (here where the block
// is in the page cache, else on the pool) and sent from there. The records are those of the session threads' tls_records path (core/tls/record.hpp):
// the client's receiver cannot tell which path sent them.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/wire/codec.hpp"
#include "serve/engine/cold_reads.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/ring_session.hpp"

namespace sluice::serve {

namespace {

// The most the control connection holds unopened: two records the peer may make as large as
// TLS allows.
constexpr size_t kMaxSealedIn = 2 * (tls::kHeaderBytes + tls::kMaxCiphertext);

} // namespace

std::string RingSession::who(const Link& l) const {
    return l.index ? "data stream " + std::to_string(l.index) : std::string("control connection");
}

void RingSession::start_tls(Link& l) {
    try {
        l.shake = std::make_unique<tls::SteppedHandshake>(l.fd.get(), tls::Side::client, l.psk,
                                                          "the client's receiver (" + who(l) + ")");
    } catch (const Error& e) {
        return fail(e.code(), e.what());
    }
    l.st = Link::St::shaking;
    shake(l);
}

void RingSession::shake(Link& l) {
    tls::SteppedHandshake::Want w;
    tls::LinkKeys k;
    try {
        w = l.shake->step();
        if (w == tls::SteppedHandshake::Want::done) k = l.shake->keys();
    } catch (const Error& e) {
        return fail(e.code(), e.what(), e.cause());
    }
    if (w == tls::SteppedHandshake::Want::read) {
        if (!l.rd_c.busy()) ring_.poll(l.rd_c, l.fd.get(), POLLIN);
        return;
    }
    if (w == tls::SteppedHandshake::Want::write) {
        if (!l.wr_c.busy()) ring_.poll(l.wr_c, l.fd.get(), POLLOUT);
        return;
    }
    l.shake.reset();
    deadline_ms_ = std::max(deadline_ms_, now_ms_ + (links_.size() < 1u + s_.streams ? s_.attach_wait_ms : s_.idle_ms));
    if (l.index == 0) {
        l.sealer = std::make_unique<tls::Sealer>(k.tx);
        l.opener = std::make_unique<tls::Opener>(k.rx, "the control connection");
        l.in.reserve(kMaxSealedIn);
    } else {
        l.sealed = std::make_unique<SealedBlock>(k.tx); // the stream's one buffer, for the whole transfer
    }
    on_secure(l);
    if (!ended_ && l.index == 0) read_records(l); // MANIFEST_ACK and the rest, from here on
}

void RingSession::read_records(Link& l) {
    constexpr size_t kCap = wire::kFrameHeaderBytes + kMaxControlFrame + tls::kMaxPlain;
    for (;;) {
        size_t at = 0;
        try {
            while (l.in.size() - at >= tls::kHeaderBytes) {
                const size_t n = l.opener->record_size(l.in.data() + at);
                if (l.in.size() - at < n) break;
                const size_t got = l.opener->open(l.in.data() + at, n);
                l.plain.insert(l.plain.end(), l.in.data() + at + tls::kHeaderBytes, l.in.data() + at + tls::kHeaderBytes + got);
                at += n;
            }
        } catch (const Error& e) {
            return fail(e.code(), std::string("the client's receiver: ") + e.what());
        }
        l.in.erase(l.in.begin(), l.in.begin() + static_cast<long>(at));
        on_control_bytes(l.plain);
        if (ended_) return;
        if (l.plain.size() >= kCap) return fail(ErrorCode::protocol, "the receiver's control frame is over 256 KiB");
        if (!receive(l, kMaxSealedIn - l.in.size())) return;
    }
}

bool RingSession::flush_tls(Link& l) {
    for (;;) {
        ssize_t n;
        if (l.index == 0) {
            // Frames queued since the last flush, sealed in records of at most 16 KiB (the
            // buffers keep their capacity: no allocation once the session is under way).
            l.sealer->seal_append(l.out.data(), l.out.size(), l.wire);
            l.out.clear();
            if (l.wire_off == l.wire.size()) {
                l.wire.clear();
                l.wire_off = 0;
                return true;
            }
            n = ::send(l.fd.get(), l.wire.data() + l.wire_off, l.wire.size() - l.wire_off, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) l.wire_off += static_cast<size_t>(n);
        } else {
            if (!l.sealed->pending()) return true;
            n = l.sealed->send_some(l.fd.get());
        }
        if (!sent(l, n)) return false;
    }
}

// A data stream: its block sent, the next range goes to the pool to be read, summed and sealed
// into the stream's buffer; once everything is verified, STREAM_END.
void RingSession::drive_sealed(Link& l) {
    while (!ended_ && l.st == Link::St::ready && !l.sealing && flush(l)) {
        Range r;
        if (allowance() == 0) return; // paced: the next tick drives this stream again
        if (next_range(SealedBlock::kMaxData, r)) {
            if (s_.rate) spend(r.end - r.off); // a whole block at once: the bucket may owe up to 1 MiB
            SumJob j = job(r);
            j.seal = l.sealed.get();
            j.link = l.index;
            if (cached(j)) {
                // In the page cache: read, hashed and sealed here, and sent at once (the loop's
                // flush) while the block is in this core's cache; sealed on the pool, it came
                // back to the ring after other blocks and was sent from memory.
                j.err = l.sealed->fill(j.fd, j.entry, j.offset, j.length, &j.sum);
                if (!sealed(l, j)) return;
                ++ring_sealed_;
                continue;
            }
            l.sealing = true;
            ++sums_in_flight_;
            pool_.push(j);
            return;
        }
        if (!all_verified_ || l.end_queued) return;
        wire::Bytes end;
        wire::encode_stream_end(end, wire::StreamEnd{l.blocks, l.bytes});
        l.sealed->seal_frame(end.data(), end.size());
        l.end_queued = true;
    }
}

// cachestat first, the reads in flight after: a page cachestat counted that a pool read is
// still filling belongs to a read registered before that page existed (cold_reads.hpp). A
// block another session's (or the HTTP engine's) pool read still fills goes to the pool too,
// which waits for it there. Reads by other processes are not seen.
bool RingSession::cached(const SumJob& j) {
    if (!sh_.cold_check || !range_cached(j.fd, j.offset, j.length)) return false;
    if (pool_.reading(j.file, j.offset, j.length) || (sh_.cold && sh_.cold->reading(j.file, j.offset, j.length))) {
        ++in_flight_;
        return false;
    }
    return true;
}

bool RingSession::sealed(Link& l, const SumJob& j) {
    if (j.err) return fail(ErrorCode::source, "reading '" + s_.src.entries[j.entry].path + "' to send it: " + std::strerror(j.err)), false;
    ++l.blocks;
    l.bytes += j.length;
    sent_bytes_ += j.length;
    deadline_ms_ = std::max(deadline_ms_, now_ms_ + s_.idle_ms); // the disk's time is not the client's
    return true;
}

void RingSession::on_sealed(const SumJob& j) {
    Link& l = *links_[j.link];
    l.sealing = false;
    ++pool_sealed_;
    if (!ended_ && sealed(l, j)) drive();
}

} // namespace sluice::serve
