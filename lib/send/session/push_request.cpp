#include "send/session/push_request.hpp"

#include <sys/socket.h>

#include <cerrno>

#include "core/io/socket.hpp"
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
                      const std::string& peer) {
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
    if (opts.certificates.any())
        throw Error(ErrorCode::usage, "pushing into " + what + " in certificate mode (--ca/--pin/--cert) is not built yet");
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
    send_all(fd, out, ("asking " + what + " to push").c_str());
    const wire::Bytes f = read_frame(fd, wire::kGetReply, "waiting for the answer of " + what);
    const wire::GetReply r =
        wire::decode_get_reply(wire::Span(f.data() + wire::kFrameHeaderBytes, f.size() - wire::kFrameHeaderBytes));
    if (r.status != wire::GetStatus::ok)
        throw Error(code_of(r.status), what + " refused the push: " + refusal_text(r.status) +
                                           (r.message.empty() ? "" : ": " + r.message));
    if (!wire::macs_equal(r.mac, wire::get_reply_mac(to.token, q.nonce, hello.nonce, hello.features)))
        throw Error(ErrorCode::auth, "authentication failed: " + what + " could not prove it holds the token");
    PushGrant g;
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
