#include "send/session/connect.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "core/io/mptcp.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/session/failure_latch.hpp"
#include "core/tls/policy.hpp"
#include "send/session/handshake.hpp"
#include "send/session/push_request.hpp"
#include "send/session/stream_governor.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

UniqueFd open_connection(const Endpoint& to, const SendOptions& opts) {
    if (!opts.connection) return connect_tcp(to.host, to.port, opts.connect_timeout_ms, opts.mptcp);
    int fd = opts.connection();
    if (fd < 0) throw Error(ErrorCode::network, "no connection to " + to.host + ":" + std::to_string(to.port) + " was handed in");
    return UniqueFd(fd);
}

namespace {

// A TCP socket that is never connected: it holds a stream's number until the stream's
// connection takes it (TCP_INFO on it reads zeros, a shutdown of it does nothing).
UniqueFd placeholder() {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) throw_errno(ErrorCode::internal, "a socket for a data stream");
    return fd;
}

// Puts fd's connection under `slot`'s number (fd is closed).
void take_number(UniqueFd fd, int slot) {
    if (::dup2(fd.get(), slot) < 0) throw_errno(ErrorCode::internal, "dup2 opening a data stream");
}

} // namespace

Connections connect_transfer(Endpoint& to, SendOptions& opts, tls::Links& links,
                             std::function<void(const Error&)> on_fail, bool records, DataStreams out,
                             StreamOpener& opener, std::function<bool()> stopped) {
    const std::string peer = to.host + ":" + std::to_string(to.port);
    Connections c;
    wire::ClientHello hello;
    wire::random_bytes(hello.transfer_id);
    c.control = open_connection(to, opts);
    if (!opts.connection) {
        set_io_timeout(c.control.get(), opts.idle_timeout_ms);
        if (is_serve_port(c.control.get())) {
            // A sluice serve (push_request.hpp): this connection carries the request alone.
            const bool encrypt = tls::wants_encryption(opts.encrypt, c.control.get());
            // Certificate mode verifies the serve on the request connection; the transfer is
            // then keyed by the token bound inside that session (PSK handshakes), as a get's.
            const std::shared_ptr<const tls::CertContext> certs = links.take_certificates();
            PushGrant g = ask_to_push(c.control.get(), to, opts, opts.streams, encrypt, peer, certs.get());
            if (certs) links.verified_by_request(g.server_spki);
            to.token = g.transfer_token;
            opts.connection = std::move(g.connect);
            c.push = true;
            c.control = open_connection(to, opts);
        }
    }
    // --streams auto on a LAN or loopback: the default count, no search (StreamGovernor::kMinRttUs).
    // The connect's SYN and SYN-ACK gave the path's first round trip, before the hello names
    // the stream count.
    const uint32_t path_us = min_rtt_us(c.control.get());
    c.path_us = path_us;
    c.streams = opts.streams;
    if (opts.streams_auto && path_us < StreamGovernor::kMinRttUs) {
        c.streams = std::min(opts.streams, kDefaultStreams);
        c.auto_fixed = "auto: " + std::to_string(c.streams) + " streams, no search: a path of " + std::to_string(path_us) +
                       " us round trip (under 2 ms, a LAN, where more streams only cost CPU)";
    }
    hello.stream_count = static_cast<uint16_t>(c.streams);
    c.control_mptcp = mptcp_of(c.control.get(), 0, opts.mptcp, false);
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
    if (links.certificates()) hello.features |= wire::kFeatureCertificateVerdict;
    hello.role = wire::Role::control;
    HelloResult r = client_handshake(c.control.get(), to.token, hello, peer);
    hello.features = r.features;
    c.features = r.features;
    c.offered = r.offered;
    c.hello = hello;
    c.congestion_control = congestion_control_of(c.control.get());
    // The handshake's round trips measured the link: every later wait scales with it.
    c.deadlines = rtt_deadlines(opts.connect_timeout_ms, opts.idle_timeout_ms, smoothed_rtt_us(c.control.get()));
    set_io_timeout(c.control.get(), c.deadlines.idle_ms);
    SendOptions scaled = opts;
    scaled.connect_timeout_ms = c.deadlines.connect_ms;
    scaled.idle_timeout_ms = c.deadlines.idle_ms;
    if (c.encrypted) {
        // What the control connection's relay failed with, first: a refusal's reason.
        auto relay_error = std::make_shared<FailureLatch>();
        c.control = links.secure(c.control.get(), tls::Side::client, r.psk, peer, 0, [relay_error, on_fail](const Error& e) {
            relay_error->fail(e);
            on_fail(e);
        });
        // A receiver from before the verdict (no bit 6) never sends one: send_core.cpp says so in -v.
        if (links.certificates() && (c.features & wire::kFeatureCertificateVerdict))
            await_certificate_verdict(c.control.get(), c.deadlines.idle_ms, peer, [relay_error] { return relay_error->error(); });
    }
    // The timeouts stay: a write to a receiver that stopped reading, and a frame that stops
    // halfway, fail after the idle timeout. Waiting for the next frame is the control reader's
    // own deadline (send_core.cpp), which counts only while the receiver owes an answer.
    out.data.clear();
    for (unsigned i = 0; i < c.streams; ++i) out.data.push_back(placeholder());
    const bool relay = c.encrypted && !records;
    out.keys.assign(c.encrypted && records ? c.streams : 0, std::nullopt);
    out.tcp.clear();
    // Placeholders too, for the same reason as data's: stop() shuts these down from another
    // thread while streams open, so a slot is never assigned after this, only dup2'ed into
    // (an assignment from the opening thread was a data race with that shutdown: scripts/test-tsan).
    for (unsigned i = 0; relay && i < c.streams; ++i) out.tcp.push_back(placeholder());
    if (opts.progress) opts.progress->stream_count = c.streams;
    const bool encrypted = c.encrypted;
    // Side by side, in the background: one after the other cost ~2.5 round trips each.
    opener.start(c.streams, kParallelOpens, [=, &links, opts = scaled](unsigned i) {
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::connecting;
        const int slot = out.data[i - 1].get();
        UniqueFd fd = open_connection(to, opts);
        set_congestion_control(fd.get(), opts.congestion_control);
        set_io_timeout(fd.get(), opts.idle_timeout_ms);
        // Frames are coalesced where more follows (MSG_MORE, sendfile): a stream's last partial
        // segment (a batch's tail, STREAM_END) held by Nagle until the receiver's delayed ACK
        // stopped an update of small files for 40 ms in about half the runs (session 14).
        set_nodelay(fd.get());
        wire::ClientHello h = hello; // each thread its own copy: the handshake fills in the nonce
        h.role = wire::Role::data;
        h.stream_index = static_cast<uint16_t>(i);
        if (relay) {
            // The TCP connection takes its tcp slot's number (the relay holds that number), and
            // the relay's plain end the data slot's.
            const int tcp_slot = out.tcp[i - 1].get();
            take_number(std::move(fd), tcp_slot);
            HelloResult hr = client_handshake(tcp_slot, to.token, h, peer);
            UniqueFd plain = links.secure(tcp_slot, tls::Side::client, hr.psk, peer, i, on_fail);
            take_number(std::move(plain), slot);
        } else {
            take_number(std::move(fd), slot);
            HelloResult hr = client_handshake(slot, to.token, h, peer);
            if (encrypted) out.keys[i - 1] = links.open_records(slot, tls::Side::client, hr.psk, peer, i);
        }
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::idle;
    }, std::move(stopped));
    return c;
}

} // namespace sluice
