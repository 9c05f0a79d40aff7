#include "send/session/connect.hpp"

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/tls/policy.hpp"
#include "send/session/handshake.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

Connections connect_transfer(const Endpoint& to, const SendOptions& opts, tls::Links& links,
                             std::function<void(const Error&)> on_fail) {
    const std::string peer = to.host + ":" + std::to_string(to.port);
    Connections c;
    wire::ClientHello hello;
    wire::random_bytes(hello.transfer_id);
    hello.stream_count = static_cast<uint16_t>(opts.streams);
    c.control = connect_tcp(to.host, to.port, opts.connect_timeout_ms);
    set_nodelay(c.control.get());
    // Set before our first byte is written: the handshake frames already go under the chosen algorithm.
    set_congestion_control(c.control.get(), opts.congestion_control);
    set_io_timeout(c.control.get(), opts.idle_timeout_ms);
    const bool encrypt = tls::wants_encryption(opts.encrypt, c.control.get());
    if (encrypt) hello.features |= wire::kFeatureEncryption;
    hello.role = wire::Role::control;
    HelloResult r = client_handshake(c.control.get(), to.token, hello, peer);
    if (encrypt) c.control = links.secure(c.control.get(), tls::Side::client, r.psk, peer, 0, on_fail);
    // The timeouts stay: a write to a receiver that stopped reading, and a frame that stops
    // halfway, fail after the idle timeout. Waiting for the next frame is the control reader's
    // own deadline (send_core.cpp), which counts only while the receiver owes an answer.
    for (unsigned i = 1; i <= opts.streams; ++i) {
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::connecting;
        UniqueFd fd = connect_tcp(to.host, to.port, opts.connect_timeout_ms);
        set_congestion_control(fd.get(), opts.congestion_control);
        set_io_timeout(fd.get(), opts.idle_timeout_ms);
        hello.role = wire::Role::data;
        hello.stream_index = static_cast<uint16_t>(i);
        r = client_handshake(fd.get(), to.token, hello, peer);
        if (encrypt) {
            c.data.push_back(links.secure(fd.get(), tls::Side::client, r.psk, peer, i, on_fail));
            c.tcp.push_back(std::move(fd));
        } else {
            c.data.push_back(std::move(fd));
        }
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::idle;
    }
    if (opts.progress) opts.progress->stream_count = opts.streams;
    return c;
}

} // namespace sluice
