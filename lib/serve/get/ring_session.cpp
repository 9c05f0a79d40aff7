// A get session's transfer on the ring: connections, handshakes, writing and the end
// (ring_session.hpp). Every socket is non-blocking; a call that would wait arms a one-shot
// poll instead, and the session goes on when it completes.
#include "serve/get/ring_session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/tls/policy.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/codec_get.hpp"
#include "serve/engine/shared.hpp"

namespace sluice::serve {

namespace {

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

ErrorCause cause_of(int e) { return e == ECONNRESET || e == EPIPE ? ErrorCause::peer_reset : ErrorCause::none; }

} // namespace

RingSession::RingSession(RingStart s, Shared& sh, Ring& ring, SumPool& pool, uint32_t slot, uint32_t gen, int64_t now_ms)
    : sh_(sh), ring_(ring), pool_(pool), s_(std::move(s)), slot_(slot), gen_(gen),
      tag_base_(static_cast<uint64_t>(slot) << kTagBits), now_ms_(now_ms), req_c_(tag_base_ | kRequestTag) {
    deadline_ms_ = now_ms + s_.attach_wait_ms;
    refilled_ms_ = now_ms;
    open_files();
    wire::random_bytes(transfer_id_);
    sh_.get_open.fetch_add(1);
    counted_open_ = true;
    watch_request();
    on_attach(now_ms);
}

RingSession::~RingSession() {
    if (counted_open_) sh_.get_open.fetch_sub(1);
}

bool RingSession::finished() const {
    if (!ended_ || sums_in_flight_ > 0 || req_c_.busy()) return false;
    for (const auto& l : links_)
        if (l->rd_c.busy() || l->wr_c.busy()) return false;
    return true;
}

// The client sends nothing more on its request connection: an end of it before the transfer's
// end is the client gone (it closes it once its receiver has finished, so not after that).
void RingSession::watch_request() { ring_.poll(req_c_, s_.request.get(), POLLIN | POLLRDHUP); }

void RingSession::on_attach(int64_t now_ms) {
    now_ms_ = now_ms;
    if (ended_ || !s_.slot) return;
    while (s_.slot) { // reset once every connection asked for is in
        UniqueFd fd = s_.slot->try_take();
        if (!fd) break;
        add_link(std::move(fd));
        if (ended_) return;
    }
    drive();
}

void RingSession::add_link(UniqueFd fd) {
    const int fl = ::fcntl(fd.get(), F_GETFL);
    if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl | O_NONBLOCK) < 0) return fail(ErrorCode::network, "fcntl O_NONBLOCK failed");
    auto l = std::make_unique<Link>(tag_base_ | (2 * links_.size()));
    l->fd = std::move(fd);
    l->index = static_cast<uint16_t>(links_.size());
    links_.push_back(std::move(l));
    deadline_ms_ = now_ms_ + (links_.size() < 1u + s_.streams ? s_.attach_wait_ms : s_.idle_ms);
    if (links_.size() == 1u + s_.streams) s_.slot.reset(); // all in: the nonce is free again
    read_link(*links_.back());
}

void RingSession::on_completion(uint64_t low, Completion& c, int64_t now_ms) {
    now_ms_ = now_ms;
    if (ended_) return;
    if (low == kRequestTag) {
        if (c.outcome() == Completion::Outcome::cancelled) return;
        if (transfer_end_) return; // the client's receiver is done; it closes this connection
        char b;
        ssize_t n = ::recv(s_.request.get(), &b, 1, MSG_DONTWAIT | MSG_PEEK);
        if (n < 0 && would_block(errno)) return watch_request();
        if (n > 0) return fail(ErrorCode::protocol, "the client sent more on its request connection after GET_REQUEST");
        return fail(ErrorCode::network, "the client closed its request connection mid-transfer", ErrorCause::peer_closed);
    }
    const size_t li = low / 2;
    if (li >= links_.size()) return;
    Link& l = *links_[li];
    if (c.outcome() == Completion::Outcome::cancelled) return;
    if (l.st == Link::St::shaking)
        shake(l); // what it waited for, a read or a write, has come
    else if (low % 2 == 0)
        read_link(l);
    if (!ended_) drive();
}

void RingSession::read_link(Link& l) {
    // Data streams read only their handshake; control reads until the end, a frame of at most
    // kMaxControlFrame at a time. Never past what the current step takes: a later step's bytes wait.
    constexpr size_t kCap = wire::kFrameHeaderBytes + kMaxControlFrame;
    for (;;) {
        if (l.st == Link::St::hello && l.in.size() >= wire::kServerHelloBytes) {
            // A data stream's hello only after the control connection's is accepted: the
            // receiver takes a transfer's streams only once it knows the transfer.
            if (l.index != 0 && links_[0]->st != Link::St::ready) return;
            on_hello_bytes(l);
            if (ended_) return;
            continue;
        }
        if (l.st == Link::St::auth && l.in.size() >= wire::kServerAuthBytes) {
            on_hello_bytes(l);
            if (ended_) return;
            continue;
        }
        if (l.st == Link::St::shaking) return shake(l); // OpenSSL reads the socket itself
        if (l.st == Link::St::ready) {
            if (l.index != 0) return;
            if (l.tls) return read_records(l);
            on_control_bytes(l.in); // takes every whole frame
            if (ended_) return;
        }
        const size_t step = l.st == Link::St::hello ? wire::kServerHelloBytes
                            : l.st == Link::St::auth ? wire::kServerAuthBytes
                                                     : kCap;
        if (l.in.size() >= step) return fail(ErrorCode::protocol, "the receiver's control frame is over 256 KiB");
        if (!receive(l, step - l.in.size())) return;
    }
}

bool RingSession::sent(Link& l, ssize_t n) {
    if (n < 0 && errno == EINTR) return true;
    if (n < 0 && would_block(errno)) {
        ring_.poll(l.wr_c, l.fd.get(), POLLOUT);
        return false;
    }
    if (n < 0) {
        const int e = errno;
        fail(ErrorCode::network, "sending to the client's " + who(l) + ": " + std::strerror(e), cause_of(e));
        return false;
    }
    deadline_ms_ = now_ms_ + s_.idle_ms;
    return true;
}

bool RingSession::receive(Link& l, size_t most) {
    unsigned char buf[4096];
    ssize_t n;
    do {
        n = ::recv(l.fd.get(), buf, std::min(sizeof buf, most), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && would_block(errno)) {
        if (!l.rd_c.busy()) ring_.poll(l.rd_c, l.fd.get(), POLLIN);
        return false;
    }
    if (n <= 0) {
        const int e = n < 0 ? errno : 0;
        fail(ErrorCode::network,
             "the client's " + who(l) + (n == 0 ? " closed" : std::string(" failed: ") + std::strerror(e)) + " before the transfer ended",
             n == 0 ? ErrorCause::peer_closed : cause_of(e));
        return false;
    }
    deadline_ms_ = now_ms_ + s_.idle_ms;
    l.in.insert(l.in.end(), buf, buf + n);
    return true;
}

void RingSession::on_hello_bytes(Link& l) {
    const std::string who = l.index ? "data stream " + std::to_string(l.index) : std::string("control connection");
    try {
        if (l.st == Link::St::hello) {
            wire::ServerHello server = wire::decode_server_hello(wire::Span(l.in.data(), wire::kServerHelloBytes));
            l.in.erase(l.in.begin(), l.in.begin() + wire::kServerHelloBytes);
            if (server.version != wire::kVersion)
                return fail(ErrorCode::protocol, "the client's receiver speaks protocol version " + std::to_string(server.version));
            // The receiver decides (encrypted unless it sees the server on loopback), and the
            // whole transfer is one way or the other: its control connection's choice.
            l.tls = server.features & wire::kFeatureEncryption;
            if (l.index == 0 && (encrypted_ = l.tls)) sh_.get_ring_encrypted.fetch_add(1);
            if (l.tls != encrypted_)
                return fail(ErrorCode::protocol, "the client's receiver encrypts some of its connections and not others (" + who + ")");
            l.server_nonce = server.nonce;
            wire::ClientHello h;
            h.role = l.index ? wire::Role::data : wire::Role::control;
            h.stream_index = l.index;
            h.stream_count = s_.streams;
            // No reconnect (attached streams cannot be reopened), no window, no updates.
            h.features = l.tls ? wire::kFeatureEncryption : 0;
            h.transfer_id = transfer_id_;
            wire::random_bytes(h.nonce);
            l.nonce = h.nonce;
            const size_t at = l.out.size();
            wire::encode_client_hello(l.out, h);
            auto mac = wire::client_hello_mac(s_.receiver_token, server.nonce,
                                              wire::client_hello_signed_part(wire::Span(l.out.data() + at, l.out.size() - at)));
            std::copy(mac.begin(), mac.end(), l.out.end() - wire::kMacBytes);
            if (l.tls) l.psk = tls::hello_psk(s_.receiver_token, server.nonce, server.features, h);
            l.st = Link::St::auth;
            return;
        }
        wire::ServerAuth auth = wire::decode_server_auth(wire::Span(l.in.data(), wire::kServerAuthBytes));
        l.in.erase(l.in.begin(), l.in.begin() + wire::kServerAuthBytes);
        if (auth.status != wire::AuthStatus::ok)
            return fail(ErrorCode::auth, "the client's receiver refused the " + who + ": " + wire::auth_status_text(auth.status));
        if (!wire::macs_equal(auth.mac, wire::server_auth_mac(s_.receiver_token, l.nonce, l.server_nonce)))
            return fail(ErrorCode::auth, "the client's receiver could not prove it holds the request's token (" + who + ")");
        if (l.tls) return start_tls(l);
        on_secure(l);
    } catch (const Error& e) {
        fail(ErrorCode::protocol, "the client's " + who + " is not a sluice receiver: " + e.what());
    }
}

void RingSession::on_secure(Link& l) {
    l.st = Link::St::ready;
    if (l.index == 0) {
        send_pages(l);
        for (size_t i = 1; i < links_.size() && !ended_; ++i) // their hellos waited for this one
            if (links_[i]->st == Link::St::hello) read_link(*links_[i]);
    }
}

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
