#include "send/session/connect.hpp"

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "send/session/handshake.hpp"
#include "send/session/stream_opener.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

Connections connect_transfer(const Endpoint& to, const SendOptions& opts) {
    const std::string peer = to.host + ":" + std::to_string(to.port);
    Connections c;
    wire::ClientHello hello;
    wire::random_bytes(hello.transfer_id);
    hello.stream_count = static_cast<uint16_t>(opts.streams);
    if (opts.retry_for_ms > 0) hello.features |= wire::kFeatureStreamReconnect; // send/session/stream_recovery.hpp
    c.control = connect_tcp(to.host, to.port, opts.connect_timeout_ms);
    set_nodelay(c.control.get());
    // Set before our first byte is written: the handshake frames already go under the chosen algorithm.
    set_congestion_control(c.control.get(), opts.congestion_control);
    set_io_timeout(c.control.get(), opts.idle_timeout_ms);
    hello.role = wire::Role::control;
    // Holes described and changed-block updates, where the receiver offers them.
    hello.features |= wire::kFeatureSparse | wire::kFeatureUpdate;
    c.features = client_handshake(c.control.get(), to.token, hello, peer);
    hello.features = c.features;
    // The timeouts stay: a write to a receiver that stopped reading, and a frame that stops
    // halfway, fail after the idle timeout. Waiting for the next frame is the control reader's
    // own deadline (send_core.cpp), which counts only while the receiver owes an answer.
    // Side by side (send/session/stream_opener.hpp): one after the other cost ~2.5 round trips each.
    c.data = open_streams(opts.streams, kParallelOpens, [&](unsigned i) {
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::connecting;
        UniqueFd fd = connect_tcp(to.host, to.port, opts.connect_timeout_ms);
        set_congestion_control(fd.get(), opts.congestion_control);
        set_io_timeout(fd.get(), opts.idle_timeout_ms);
        wire::ClientHello h = hello; // each thread its own copy: the handshake fills in the nonce
        h.role = wire::Role::data;
        h.stream_index = static_cast<uint16_t>(i);
        client_handshake(fd.get(), to.token, h, peer);
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::idle;
        return fd;
    });
    if (opts.progress) opts.progress->stream_count = opts.streams;
    c.hello = hello;
    return c;
}

} // namespace sluice
