#include "send/session/connect.hpp"

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/tls/policy.hpp"
#include "send/session/handshake.hpp"
#include "send/session/stream_opener.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

UniqueFd open_connection(const Endpoint& to, const SendOptions& opts) {
    if (!opts.connection) return connect_tcp(to.host, to.port, opts.connect_timeout_ms);
    int fd = opts.connection();
    if (fd < 0) throw Error(ErrorCode::network, "no connection to " + to.host + ":" + std::to_string(to.port) + " was handed in");
    return UniqueFd(fd);
}

Connections connect_transfer(const Endpoint& to, const SendOptions& opts, tls::Links& links,
                             std::function<void(const Error&)> on_fail, bool records) {
    const std::string peer = to.host + ":" + std::to_string(to.port);
    Connections c;
    wire::ClientHello hello;
    wire::random_bytes(hello.transfer_id);
    hello.stream_count = static_cast<uint16_t>(opts.streams);
    c.control = open_connection(to, opts);
    set_nodelay(c.control.get());
    // Set before our first byte is written: the handshake frames already go under the chosen algorithm.
    set_congestion_control(c.control.get(), opts.congestion_control);
    set_io_timeout(c.control.get(), opts.idle_timeout_ms);
    c.encrypted = tls::wants_encryption(opts.encrypt, c.control.get());
    if (c.encrypted) hello.features |= wire::kFeatureEncryption;
    // A reopened stream starts over in clear (send/session/stream_recovery.hpp), so with
    // encryption a broken stream fails the transfer instead: never a byte of it in clear.
    if (opts.retry_for_ms > 0 && !c.encrypted) hello.features |= wire::kFeatureStreamReconnect;
    // Holes described and changed-block updates, where the receiver offers them.
    hello.features |= wire::kFeatureSparse | wire::kFeatureUpdate;
    // Owners, xattrs, ACLs, hard links, special files and --delete, where the receiver offers them.
    hello.features |= wire::kFeatureTreeMeta;
    if (opts.announce_window > 0) hello.features |= wire::kFeatureAnnounceWindow;
    hello.role = wire::Role::control;
    HelloResult r = client_handshake(c.control.get(), to.token, hello, peer);
    hello.features = r.features;
    c.features = r.features;
    if (c.encrypted) c.control = links.secure(c.control.get(), tls::Side::client, r.psk, peer, 0, on_fail);
    // The timeouts stay: a write to a receiver that stopped reading, and a frame that stops
    // halfway, fail after the idle timeout. Waiting for the next frame is the control reader's
    // own deadline (send_core.cpp), which counts only while the receiver owes an answer.
    // Side by side (send/session/stream_opener.hpp): one after the other cost ~2.5 round trips each.
    if (c.encrypted && records) c.keys.resize(opts.streams);
    if (c.encrypted && !records) c.tcp.resize(opts.streams);
    c.data = open_streams(opts.streams, kParallelOpens, [&](unsigned i) {
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::connecting;
        UniqueFd fd = open_connection(to, opts);
        set_congestion_control(fd.get(), opts.congestion_control);
        set_io_timeout(fd.get(), opts.idle_timeout_ms);
        wire::ClientHello h = hello; // each thread its own copy: the handshake fills in the nonce
        h.role = wire::Role::data;
        h.stream_index = static_cast<uint16_t>(i);
        HelloResult hr = client_handshake(fd.get(), to.token, h, peer);
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::idle;
        if (!c.encrypted) return fd;
        if (records) {
            c.keys[i - 1] = links.open_records(fd.get(), tls::Side::client, hr.psk, peer, i); // each thread its own slot
            return fd;
        }
        UniqueFd plain = links.secure(fd.get(), tls::Side::client, hr.psk, peer, i, on_fail);
        c.tcp[i - 1] = std::move(fd); // each thread its own slot
        return plain;
    });
    if (opts.progress) opts.progress->stream_count = opts.streams;
    c.hello = hello;
    return c;
}

} // namespace sluice
