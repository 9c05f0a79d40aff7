#pragma once
// One connection to the sluice port on the get ring, from its accept until its first frame is
// handled: GET_HELLO out, then GET_REQUEST or GET_ATTACH in (header first, then a payload of
// at most wire::kMaxGetPayload), all under the request deadline (scaled with the round trip the
// TCP handshake measured). No thread reads it. What follows is RingGets' to decide (a request:
// refused here, or sent on the ring; an attach: handed to the get waiting for it). A refusal's
// reply is written here, and the connection lingers: our side ended, what the client still
// sends read and dropped (at most 64 KiB, at most a second), so the reply is not destroyed by
// a reset. Certificate mode (ring_request_tls.cpp): a client that begins TLS has its
// certificate handshake stepped here (tls::SteppedHandshake, under the same deadline), then
// its GET_REQUEST read through records and the reply sealed.
#include <cstdint>
#include <memory>

#include "core/io/unique_fd.hpp"
#include "core/ring/ring.hpp"
#include "core/tls/cert.hpp"
#include "core/tls/record.hpp"
#include "serve/get/judge.hpp"
#include "serve/get/ring_session.hpp"

namespace sluice::serve {

struct Shared;

class RingRequest {
public:
    // Completion tags: tag_base | 0 (reads), tag_base | 1 (writes).
    RingRequest(UniqueFd fd, Shared& sh, Ring& ring, uint64_t tag_base, int64_t now_ms);
    RingRequest(const RingRequest&) = delete;
    RingRequest& operator=(const RingRequest&) = delete;

    enum class St : uint8_t {
        reading,   // GET_HELLO out, the first frame in
        tls,       // the client began a TLS handshake (certificate mode): start_tls(), or take() it
        shaking,   // certificate mode: the TLS handshake, stepped; then reading, through records
        attach,    // a GET_ATTACH came: nonce() says for which get; take() the connection
        request,   // a GET_REQUEST came: take() it, or reply()
        replying,  // a reply going out; then lingering, or ready
        lingering, // a refusal sent: draining the client's rest
        ready,     // the reply ok is out: take() the connection for the ring's session
        done,      // closed (or taken): goes once finished()
    };
    St state() const { return st_; }
    void on_completion(uint64_t low_tag, Completion& c, int64_t now_ms);
    void tick(int64_t now_ms); // the deadline
    void cancel();             // the server stops
    bool finished() const { return st_ == St::done && !rd_c_.busy() && !wr_c_.busy() && !walking; }

    const GetNonce& nonce() const { return nonce_; }
    // attach: the connection; request: the request read, with it; ready: the connection.
    Asked& asked() { return asked_; }
    UniqueFd take();
    // request: sends r; a refusal then lingers, an ok ends in ready.
    void reply(const wire::GetReply& r);
    // tls: the certificate handshake with certs (which outlives this), stepped on the ring.
    void start_tls(const tls::CertContext& certs);
    // ready, in certificate mode: the request connection's sealer (GET_DONE goes in records).
    std::unique_ptr<tls::Sealer> take_sealer() { return std::move(sealer_); }
    // An ok reply's transfer, made before the reply went out (its slot must wait for the
    // client's connections first); started on the ring once ready (its request fd: take()).
    RingStart start;
    // A tree's walk on the ring's pool (RingGets::on_request): the request waits in
    // St::request, neither timed out (the disk's time is not the client's) nor freed until the
    // walk is back; walked (or walk_error: the walk threw) is written by the pool thread.
    bool walking = false;
    Judged walked;
    std::string walk_error;

private:
    void read_more();
    bool peek_tls(); // certificate mode: true once the first byte is known (st_ is tls when it began TLS)
    // The bytes the first frame has as far as in_ tells (the header's until it is in); 0 when
    // its header was refused (answered, or closed).
    size_t first_frame_size();
    void on_frame();
    void linger(); // our side ended, the client's rest drained, then closed
    // ring_request_tls.cpp: certificate mode
    void shake();
    void read_records(); // GET_REQUEST through records: opened into in_
    void count_session(uint8_t type); // the first frame's type: a get or a push
    void refuse(const std::string& why); // a malformed request: bad_request, counted failed
    void flush();
    void drain();
    void close();

    Shared& sh_;
    Ring& ring_;
    St st_ = St::reading;
    Asked asked_; // its fd is the connection
    wire::Bytes in_, out_;
    size_t out_off_ = 0, drained_ = 0;
    bool ok_reply_ = false;
    bool peeked_ = true; // set false when this port has a certificate: the first byte is looked at first
    int64_t now_ms_ = 0, deadline_ms_ = 0;
    GetNonce nonce_{};
    // Certificate mode: the handshake, then the record layer's two directions.
    const tls::CertContext* certs_ = nullptr;
    std::unique_ptr<tls::SteppedHandshake> shake_;
    std::unique_ptr<tls::Opener> opener_;
    std::unique_ptr<tls::Sealer> sealer_;
    std::vector<unsigned char> sealed_in_; // at most a record not yet whole
    bool tls_ = false;       // began TLS: counted a session (RingGets::on_tls) before its request
    bool requested_ = false; // a GET_REQUEST (or its refusal) was had: from here it is counted as any
    Completion rd_c_, wr_c_;
};

} // namespace sluice::serve
