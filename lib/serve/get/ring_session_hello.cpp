// A get session's transfer on the ring: the sluice hello on each of its connections
// (ring_session.hpp): the receiver's ServerHello read, our ClientHello with the token's MAC,
// its ServerAuth checked; then the TLS handshake (ring_session_tls.cpp) or, in clear, ready.
// The control connection's first: a data stream's hello waits until it is ready.
#include <algorithm>

#include "core/tls/policy.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/ring_session.hpp"

namespace sluice::serve {

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
            if (s_.back.len && l.index) connect_more(); // this one is past the receiver's pending bound
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
        if (s_.back.len) connect_streams();
        send_pages(l);
        for (size_t i = 1; i < links_.size() && !ended_; ++i) // their hellos waited for this one
            if (links_[i]->st == Link::St::hello) read_link(*links_[i]);
    }
}

} // namespace sluice::serve
