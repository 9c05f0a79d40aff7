// Certificate mode on the get ring (ring_request.hpp; docs/protocol.md, "Certificate mode"):
// a request connection that began TLS runs the TLS 1.3 handshake with the port's certificate
// here, stepped on its non-blocking socket (CertContext::stepped: the same OpenSSL context,
// callbacks and checks of --ca/--pin/--crl as the blocking handshake of send/recv), under the
// request deadline; then GET_REQUEST is read through records (at most one record unopened,
// the frame bounded as in clear) and the reply sealed (reply()). The receiver_token the
// request carries travels only inside this authenticated session, so the transfer's PSK
// handshakes (keyed by it) admit only a receiver this client started.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "core/wire/codec_get.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/ring_request.hpp"

namespace sluice::serve {

void RingRequest::start_tls(const tls::CertContext& certs) {
    tls_ = true; // RingGets::on_tls counted the session
    certs_ = &certs;
    const PeerAddress p = peer_address(asked_.fd.get());
    asked_.host = p.host;
    asked_.peer_port = p.port;
    const std::string who = "the client " + (p.host.empty() ? std::string("(address unknown)") : p.host);
    try {
        shake_ = certs.stepped(asked_.fd.get(), "", who + " (get request connection)");
    } catch (const Error& e) {
        if (sh_.opt.verbose && sh_.opt.log) sh_.opt.log(std::string("get session in certificate mode: ") + e.what());
        return close();
    }
    st_ = St::shaking;
    shake();
}

void RingRequest::shake() {
    tls::SteppedHandshake::Want w;
    tls::CertOutcome r;
    try {
        w = shake_->step();
        if (w == tls::SteppedHandshake::Want::done) r = certs_->outcome(*shake_);
    } catch (const Error& e) {
        // A refused certificate (ours by the client, or the client's by --ca/--pin/--crl), or
        // a client that is not speaking TLS. OpenSSL has sent its alert: lingering lets the
        // client read it (a close with its Finished unread would reset the connection).
        sh_.get_certificate_failed.fetch_add(1);
        if (sh_.opt.verbose && sh_.opt.log) sh_.opt.log(std::string("get session in certificate mode: ") + e.what());
        shake_.reset();
        return linger();
    }
    if (w == tls::SteppedHandshake::Want::read) {
        if (!rd_c_.busy()) ring_.poll(rd_c_, asked_.fd.get(), POLLIN);
        return;
    }
    if (w == tls::SteppedHandshake::Want::write) {
        if (!wr_c_.busy()) ring_.poll(wr_c_, asked_.fd.get(), POLLOUT);
        return;
    }
    shake_.reset();
    asked_.tls = true;
    asked_.client_spki = r.peer_spki;
    opener_ = std::make_unique<tls::Opener>(r.keys.rx, "the get request connection");
    sealer_ = std::make_unique<tls::Sealer>(r.keys.tx);
    sealed_in_.reserve(tls::kHeaderBytes + tls::kMaxCiphertext);
    if (sh_.opt.verbose && sh_.opt.log)
        sh_.opt.log("request from " + asked_.host + " in certificate mode (a get or a push: its frame says)" +
                    (r.peer_spki.empty() ? std::string() : ", client key " + r.peer_spki));
    st_ = St::reading;
    read_more();
}

void RingRequest::read_records() {
    constexpr size_t kCap = tls::kHeaderBytes + tls::kMaxCiphertext; // one record, the most a peer may make
    for (;;) {
        size_t at = 0;
        try {
            while (sealed_in_.size() - at >= tls::kHeaderBytes) {
                const size_t n = opener_->record_size(sealed_in_.data() + at);
                if (sealed_in_.size() - at < n) break;
                const size_t got = opener_->open(sealed_in_.data() + at, n);
                in_.insert(in_.end(), sealed_in_.data() + at + tls::kHeaderBytes, sealed_in_.data() + at + tls::kHeaderBytes + got);
                at += n;
            }
        } catch (const Error& e) {
            if (sh_.opt.verbose && sh_.opt.log) sh_.opt.log(std::string("get session in certificate mode: ") + e.what());
            return close(); // a record that does not open: nothing can be answered in it
        }
        sealed_in_.erase(sealed_in_.begin(), sealed_in_.begin() + static_cast<long>(at));
        const size_t want = first_frame_size();
        if (want == 0) return;
        if (in_.size() == want) return on_frame();
        if (in_.size() > want) { // the client sends nothing after its request: hostile or broken
            count_session(wire::kGetRequest);
            return refuse("more than GET_REQUEST in the request's records");
        }
        const size_t have = sealed_in_.size();
        sealed_in_.resize(kCap);
        ssize_t n = ::recv(asked_.fd.get(), sealed_in_.data() + have, kCap - have, MSG_DONTWAIT);
        sealed_in_.resize(have + (n > 0 ? static_cast<size_t>(n) : 0));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!rd_c_.busy()) ring_.poll(rd_c_, asked_.fd.get(), POLLIN);
            return;
        }
        if (n <= 0) return close(); // the client went before its request: counted failed (close)
    }
}

} // namespace sluice::serve
