#include "send/session/handshake.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/tls/policy.hpp"
#include "sluice/error.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

wire::ServerHello read_server_hello(int fd, const std::string& peer) {
    std::array<unsigned char, wire::kServerHelloBytes> sh{};
    recv_exact(fd, sh, ("handshake with " + peer).c_str());
    wire::ServerHello server;
    try {
        server = wire::decode_server_hello(sh);
    } catch (const Error& e) {
        throw Error(ErrorCode::protocol, peer + " is not a sluice receiver (" + e.what() + ")");
    }
    if (server.version != wire::kVersion)
        throw Error(ErrorCode::protocol, peer + " speaks sluice protocol version " + std::to_string(server.version) +
                                             ", this sender speaks " + std::to_string(wire::kVersion));
    return server;
}

HelloResult client_handshake(int fd, const std::string& token, wire::ClientHello hello, const std::string& peer,
                             const std::function<void()>& sent) {
    return answer_server_hello(fd, token, std::move(hello), read_server_hello(fd, peer), peer, sent);
}

HelloResult answer_server_hello(int fd, const std::string& token, wire::ClientHello hello, const wire::ServerHello& server,
                                const std::string& peer, const std::function<void()>& sent) {
    // Offered features the receiver lacks are dropped; the encryption bit stays, so a receiver
    // that does not encrypt can name the mismatch instead of finding garbage.
    hello.features = static_cast<uint8_t>((hello.features & server.features) | (hello.features & wire::kFeatureEncryption));
    wire::random_bytes(hello.nonce);
    wire::Bytes out;
    wire::encode_client_hello(out, hello);
    auto mac = wire::client_hello_mac(token, server.nonce, wire::client_hello_signed_part(out));
    std::copy(mac.begin(), mac.end(), out.end() - wire::kMacBytes);
    send_all(fd, out, ("handshake with " + peer).c_str());
    if (sent) sent();

    std::array<unsigned char, wire::kServerAuthBytes> sa{};
    recv_exact(fd, sa, ("handshake with " + peer).c_str());
    wire::ServerAuth auth = wire::decode_server_auth(sa);
    const bool we_encrypt = hello.features & wire::kFeatureEncryption;
    if (auth.status == wire::AuthStatus::encryption_mismatch)
        throw Error(ErrorCode::auth, tls::mismatch_text_for_sender(peer, we_encrypt));
    if (auth.status == wire::AuthStatus::bad_token)
        throw Error(ErrorCode::auth, "authentication failed: " + peer + " refused the token");
    if (auth.status != wire::AuthStatus::ok)
        throw Error(ErrorCode::auth, peer + " refused the connection: " + wire::auth_status_text(auth.status));
    if (!wire::macs_equal(auth.mac, wire::server_auth_mac(token, hello.nonce, server.nonce)))
        throw Error(ErrorCode::auth, "authentication failed: " + peer + " could not prove it holds the token");
    // The receiver checks our bit; its own hello is covered by the PSK, so a bit altered in
    // flight fails the TLS handshake. Said here first, for the clearer message.
    if (we_encrypt != bool(server.features & wire::kFeatureEncryption))
        throw Error(ErrorCode::auth, tls::mismatch_text_for_sender(peer, we_encrypt));
    return HelloResult{.psk = tls::hello_psk(token, server.nonce, server.features, hello), .features = hello.features, .offered = server.features};
}

void await_certificate_verdict(int fd, int wait_ms, const std::string& peer,
                               const std::function<std::optional<Error>()>& relay_error) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    const std::string what = "waiting for " + peer + " to accept the certificate handshake";
    // The frame header byte by byte as it comes, every wait under the one deadline: the plain
    // fd (a relay's end) has no timeouts of its own, and a receiver may stop mid-frame.
    unsigned char h[wire::kFrameHeaderBytes];
    size_t got = 0;
    try {
        while (got < sizeof h) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                throw Error(ErrorCode::network,
                            peer + " did not answer the certificate handshake within " + timeout_text(wait_ms),
                            ErrorCause::timed_out);
            pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue; // EINTR, or the deadline
            const ssize_t n = ::recv(fd, h + got, sizeof h - got, MSG_DONTWAIT);
            if (n == 0) throw Error(ErrorCode::network, peer + " closed the control connection while " + what, ErrorCause::peer_closed);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n < 0) throw_errno(ErrorCode::network, what.c_str());
            got += static_cast<size_t>(n);
        }
        const wire::FrameHeader f = wire::decode_frame_header(h);
        if (static_cast<wire::FrameType>(f.type) != wire::FrameType::certificate_accepted)
            throw Error(ErrorCode::protocol, peer + " sent " + wire::frame_type_name(f.type) +
                                                 " where CERTIFICATE_ACCEPTED was due (certificate mode)");
    } catch (const Error&) {
        if (std::optional<Error> why = relay_error()) throw *why;
        throw;
    }
}

} // namespace sluice
