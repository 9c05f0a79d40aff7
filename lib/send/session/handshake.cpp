#include "send/session/handshake.hpp"

#include "core/io/socket.hpp"
#include "core/tls/policy.hpp"
#include "sluice/error.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

HelloResult client_handshake(int fd, const std::string& token, wire::ClientHello hello, const std::string& peer) {
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
    // Offered features the receiver lacks are dropped; the encryption bit stays, so a receiver
    // that does not encrypt can name the mismatch instead of finding garbage.
    hello.features = static_cast<uint8_t>((hello.features & server.features) | (hello.features & wire::kFeatureEncryption));
    wire::random_bytes(hello.nonce);
    wire::Bytes out;
    wire::encode_client_hello(out, hello);
    auto mac = wire::client_hello_mac(token, server.nonce, wire::client_hello_signed_part(out));
    std::copy(mac.begin(), mac.end(), out.end() - wire::kMacBytes);
    send_all(fd, out, ("handshake with " + peer).c_str());

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
    return HelloResult{.psk = tls::hello_psk(token, server.nonce, server.features, hello), .features = hello.features};
}

} // namespace sluice
