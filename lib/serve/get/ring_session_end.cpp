// A get session's transfer on the ring: its deadline, its failure and its end
// (ring_session.hpp): ABORT to the receiver where it can hear it, GET_DONE to the client, the
// counters and -v.
#include <sys/socket.h>

#include "core/tls/record.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/codec_get.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/ring_session.hpp"

namespace sluice::serve {

void RingSession::tick(int64_t now_ms) {
    now_ms_ = now_ms;
    if (paced_ && !ended_) { // streams waited for --get-rate-limit's tokens: the clock has added some
        paced_ = false;
        drive();
    }
    if (ended_ || now_ms < deadline_ms_ || sums_in_flight_ > 0) return; // a read of the disk: its own bound
    if (connecting_ > 0)
        return fail(ErrorCode::network,
                    "connecting back to the client's receiver at " + s_.back.name + ": no connection within " +
                        std::to_string((links_.size() > 1 ? stream_connect_ms_ : s_.back.connect_ms) / 1000) +
                        " s (--connect-back: the server connects to the address the request came from)",
                    ErrorCause::timed_out);
    if (!s_.back.len && links_.size() < 1u + s_.streams)
        return fail(ErrorCode::network,
                    "the client did not connect its next stream within " + std::to_string(s_.attach_wait_ms / 1000) +
                        " s (a get without connect-back: the client connects out with GET_ATTACH)",
                    ErrorCause::timed_out);
    fail(ErrorCode::network, "the client made no progress for " + std::to_string(s_.idle_ms / 1000) + " s", ErrorCause::timed_out);
}

void RingSession::cancel() {
    if (!ended_) fail(ErrorCode::cancelled, "the server is stopping");
}

void RingSession::fail(ErrorCode code, const std::string& why, ErrorCause) {
    if (ended_) return;
    if (!links_.empty() && links_[0]->st == Link::St::ready && !links_[0]->wr_c.busy()) {
        Link& c = *links_[0];
        wire::Bytes a; // best effort: the receiver hears why, if its socket has room
        wire::encode_abort(a, wire::Abort{1, why.substr(0, 1024)});
        if (c.tls) {
            // Sealed, and only where nothing sealed waits (a record half sent would garble it).
            wire::Bytes r;
            if (c.wire.empty() && c.sealer) {
                r.resize(a.size() + tls::kRecordOverhead);
                std::copy(a.begin(), a.end(), r.begin() + tls::kHeaderBytes);
                r.resize(c.sealer->seal(r.data(), a.size()));
            }
            a.swap(r);
        }
        if (!a.empty()) {
            [[maybe_unused]] ssize_t n = ::send(c.fd.get(), a.data(), a.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        }
    }
    finish(1 + static_cast<uint32_t>(code), why);
}

void RingSession::finish(uint32_t status, const std::string& message) {
    ended_ = true;
    ok_ = status == 0;
    wire::GetDone done{status, message};
    wire::Bytes out;
    wire::encode_get_done(out, done);
    if (s_.request_sealer) { // certificate mode: in records, as the reply was
        wire::Bytes r;
        s_.request_sealer->seal_append(out.data(), out.size(), r);
        out.swap(r);
    }
    // A few dozen bytes into a socket that has carried only the reply: it has the room.
    [[maybe_unused]] ssize_t n = ::send(s_.request.get(), out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(s_.request.get(), SHUT_WR);
    ring_.cancel(req_c_);
    for (auto& l : links_) {
        if (!ok_) ::shutdown(l->fd.get(), SHUT_RDWR);
        ring_.cancel(l->rd_c);
        ring_.cancel(l->wr_c);
    }
    s_.slot.reset();
    sh_.get_bytes.fetch_add(sent_bytes_);
    if (!ok_) sh_.get_failed.fetch_add(1);
    sh_.get_open.fetch_sub(1);
    counted_open_ = false;
    std::string what = tree() ? "on the get ring, a tree of " + std::to_string(s_.src.entries.size()) + " entries" : "on the get ring";
    if (s_.rate) what += ", paced at " + std::to_string(s_.rate) + " bytes/s (--get-rate-limit)";
    if (s_.back.len) what += ", connected back to " + s_.back.name + " (--connect-back)";
    if (s_.request_sealer) what += ", certificate mode (the request's TLS handshake and records on the get ring)";
    if (sh_.opt.verbose && sh_.opt.log)
        sh_.opt.log("get " + s_.label +
                    (encrypted_ ? " (" + what + ", encrypted: TLS 1.3; blocks sealed on the ring " + std::to_string(ring_sealed_) +
                                      ", on the pool (not in the page cache) " + std::to_string(pool_sealed_) +
                                      "; of these, in the cache but still being read " + std::to_string(in_flight_) + "): "
                                : " (" + what + "): ") +
                    (ok_ ? std::string("sent") : message));
}

} // namespace sluice::serve
