#include "send/session/push_request.hpp"

#include <sys/socket.h>

#include <cerrno>

#include <memory>

#include "core/io/socket.hpp"
#include "core/tls/record.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec_get.hpp"

namespace sluice {

namespace {

// One get frame of `type` read whole (header, then at most kMaxGetPayload) under fd's timeout.
wire::Bytes read_frame(int fd, uint8_t type, const std::string& what) {
    wire::Bytes f(wire::kFrameHeaderBytes);
    recv_exact(fd, f, what.c_str());
    const uint32_t n = wire::decode_get_frame_header(wire::Span(f.data(), f.size()), type);
    f.resize(wire::kFrameHeaderBytes + n);
    recv_exact(fd, std::span<unsigned char>(f.data() + wire::kFrameHeaderBytes, n), what.c_str());
    return f;
}

wire::GetHello read_hello(int fd, const std::string& peer) {
    const wire::Bytes f = read_frame(fd, wire::kGetHello, "reading the hello of the sluice serve at " + peer);
    return wire::decode_get_hello(wire::Span(f.data() + wire::kFrameHeaderBytes, f.size() - wire::kFrameHeaderBytes));
}

ErrorCode code_of(wire::GetStatus s) {
    switch (s) {
    case wire::GetStatus::bad_token:
    case wire::GetStatus::bad_request:
    case wire::GetStatus::certificate_required: return ErrorCode::auth;
    case wire::GetStatus::busy: return ErrorCode::network;
    default: return ErrorCode::protocol;
    }
}

// GET_REPLY's status as a push's sender says it (get_status_text speaks of gets).
const char* refusal_text(wire::GetStatus s) {
    switch (s) {
    case wire::GetStatus::bad_token: return "authentication failed (wrong token)";
    case wire::GetStatus::busy: return "busy";
    case wire::GetStatus::missing_feature: return "a feature is missing";
    case wire::GetStatus::certificate_required: return "a client certificate is required";
    default: return "refused";
    }
}

// Certificate mode's request connection after its handshake: frames sealed into records, and
// one get frame read back out of them (whole records, each bounded by TLS's limit; the frame
// by kMaxGetPayload, as in clear).
class RequestRecords {
public:
    explicit RequestRecords(const tls::LinkKeys& k) : sealer_(k.tx), opener_(k.rx, "the push request connection") {}
    void send(int fd, const wire::Bytes& frame, const char* what) {
        wire::Bytes sealed;
        sealer_.seal_append(frame.data(), frame.size(), sealed);
        send_all(fd, sealed, what);
    }
    wire::Bytes read_frame(int fd, uint8_t type, const std::string& what) {
        wire::Bytes plain;
        size_t want = wire::kFrameHeaderBytes;
        // Each read is under fd's timeout; the count bounds a peer that trickles empty records
        // (a reply is one record from a serve, at most two full ones from any).
        for (unsigned records = 0; plain.size() < want; ++records) {
            if (records == kMaxRecords)
                throw Error(ErrorCode::protocol, what + ": no whole frame in " + std::to_string(kMaxRecords) + " TLS records");
            wire::Bytes rec(tls::kHeaderBytes);
            recv_exact(fd, rec, what.c_str());
            const size_t n = opener_.record_size(rec.data());
            rec.resize(n);
            recv_exact(fd, std::span<unsigned char>(rec.data() + tls::kHeaderBytes, n - tls::kHeaderBytes), what.c_str());
            const size_t got = opener_.open(rec.data(), n);
            plain.insert(plain.end(), rec.begin() + tls::kHeaderBytes, rec.begin() + static_cast<long>(tls::kHeaderBytes + got));
            if (plain.size() >= wire::kFrameHeaderBytes)
                want = wire::kFrameHeaderBytes + wire::decode_get_frame_header(wire::Span(plain.data(), wire::kFrameHeaderBytes), type);
        }
        if (plain.size() > want)
            throw Error(ErrorCode::protocol, what + ": more than one frame in its records");
        return plain;
    }

private:
    static constexpr unsigned kMaxRecords = 64;
    tls::Sealer sealer_;
    tls::Opener opener_;
};

} // namespace

bool is_serve_port(int fd) {
    for (;;) {
        unsigned char b = 0;
        const ssize_t n = ::recv(fd, &b, 1, MSG_PEEK);
        if (n < 0 && errno == EINTR) continue;
        return n == 1 && b == wire::kGetHello;
    }
}

PushGrant ask_to_push(int fd, const Endpoint& to, const SendOptions& opts, unsigned streams, bool encrypted,
                      const std::string& peer, const tls::CertContext* certs) {
    const std::string what = "the sluice serve at " + peer;
    wire::GetHello hello;
    try {
        hello = read_hello(fd, peer);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::protocol) throw;
        throw Error(ErrorCode::protocol, peer + " is neither a sluice receiver nor a sluice serve port (" + e.what() + ")");
    }
    if (hello.version != wire::kVersion)
        throw Error(ErrorCode::protocol, what + " speaks sluice protocol version " + std::to_string(hello.version) +
                                             ", this sender speaks " + std::to_string(wire::kVersion));
    if (!(hello.features & wire::kFeatureGetPush))
        throw Error(ErrorCode::protocol, what + " does not take pushes (a serve from before them): use sluice recv there, "
                                                "or HTTP PUT with --allow-upload");
    std::unique_ptr<RequestRecords> records;
    std::string spki;
    if (certs) {
        // Never a request in clear to a server this side was told to verify.
        if (!(hello.features & wire::kFeatureGetCertificate))
            throw Error(ErrorCode::auth, what + " has no certificate on its sluice port (it was not started with --cert and "
                                                "--key): the push is not asked for unauthenticated (--ca and --pin verify a server)");
        if (!(hello.features & wire::kFeatureGetPushCertificate))
            throw Error(ErrorCode::protocol, what + " does not take pushes in certificate mode (a serve from before them): "
                                                    "push without --ca/--pin/--cert, or use sluice recv there");
        const tls::CertOutcome r = certs->handshake(fd, to.host, "server " + peer);
        if (opts.verbose && opts.log)
            opts.log("server " + peer + ": certificate verified (" +
                     (opts.certificates.ca_file.empty() ? std::string("--pin") : "--ca " + opts.certificates.ca_file) +
                     "), key " + r.peer_spki + "; the push request is TLS 1.3 and keys the transfer (PSK handshakes)");
        records = std::make_unique<RequestRecords>(r.keys);
        spki = r.peer_spki;
        encrypted = true; // certificate mode's transfer is encrypted: its keys are what bind it to this session
    } else if ((hello.features & wire::kFeatureGetCertificate) && opts.verbose && opts.log) {
        opts.log(what + " has a certificate on its sluice port; this push does not verify it (give --ca FILE or --pin "
                        "sha256:HEX to)");
    }
    wire::GetRequest q;
    q.features = static_cast<uint8_t>(wire::kFeatureGetSessions | wire::kGetBoundTransfer |
                                      (encrypted ? wire::kGetEncrypted : wire::kGetClear));
    q.streams = static_cast<uint16_t>(streams);
    q.reply_port = 0;
    wire::random_bytes(q.nonce);
    q.receiver_token = wire::random_token(); // R: the transfer's token is derived from it (never sent)
    wire::Bytes out;
    wire::encode_push_request(out, q);
    const wire::Mac mac = wire::client_hello_mac(to.token, hello.nonce, wire::get_request_signed_part(out));
    std::copy(mac.begin(), mac.end(), out.end() - wire::kMacBytes);
    if (records) records->send(fd, out, ("asking " + what + " to push").c_str());
    else send_all(fd, out, ("asking " + what + " to push").c_str());
    const wire::Bytes f = records ? records->read_frame(fd, wire::kGetReply, "waiting for the answer of " + what)
                                  : read_frame(fd, wire::kGetReply, "waiting for the answer of " + what);
    const wire::GetReply r =
        wire::decode_get_reply(wire::Span(f.data() + wire::kFrameHeaderBytes, f.size() - wire::kFrameHeaderBytes));
    if (r.status != wire::GetStatus::ok)
        throw Error(code_of(r.status), what + " refused the push: " + refusal_text(r.status) +
                                           (r.message.empty() ? "" : ": " + r.message));
    if (!wire::macs_equal(r.mac, wire::get_reply_mac(to.token, q.nonce, hello.nonce, hello.features)))
        throw Error(ErrorCode::auth, "authentication failed: " + what + " could not prove it holds the token");
    PushGrant g;
    g.server_spki = std::move(spki);
    g.transfer_token = wire::get_transfer_token(to.token, q.nonce, q.receiver_token);
    const std::string host = to.host;
    const uint16_t port = to.port;
    const int connect_ms = opts.connect_timeout_ms;
    const bool mptcp = opts.mptcp;
    const auto nonce = q.nonce;
    g.connect = [host, port, connect_ms, mptcp, nonce, peer]() -> int {
        UniqueFd c = connect_tcp(host, port, connect_ms, mptcp);
        set_io_timeout(c.get(), connect_ms); // the hello and the attach: the handshake sets its own
        read_hello(c.get(), peer);
        wire::Bytes a;
        wire::encode_get_attach(a, nonce);
        send_all(c.get(), a, ("attaching a connection to the push into the sluice serve at " + peer).c_str());
        return c.release();
    };
    return g;
}

} // namespace sluice
