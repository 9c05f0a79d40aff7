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
#include "send/session/hello_gate.hpp"
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

// The control connection's hello, then its TLS handshake and the certificate verdict where
// asked: what the data streams' hellos wait for (hello_gate.hpp). Fills c's features and
// deadlines.
void finish_control(Connections& c, const Endpoint& to, const SendOptions& opts, tls::Links& links, wire::ClientHello hello,
                    const std::string& peer, const std::function<void(const Error&)>& on_fail,
                    const std::function<void()>& hello_sent) {
    HelloResult r = client_handshake(c.control.get(), to.token, hello, peer, hello_sent);
    hello.features = r.features;
    c.features = r.features;
    c.offered = r.offered;
    c.hello = hello;
    c.congestion_control = congestion_control_of(c.control.get());
    // The handshake's round trips measured the link: every later wait scales with it.
    c.deadlines = rtt_deadlines(opts.connect_timeout_ms, opts.idle_timeout_ms, smoothed_rtt_us(c.control.get()));
    set_io_timeout(c.control.get(), c.deadlines.idle_ms);
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
}

// Starts opening c.streams data streams on `opener`, each connecting and reading the
// receiver's hello at once and sending its own once the gate opens.
void open_data_streams(const Connections& c, const Endpoint& to, const SendOptions& opts, tls::Links& links,
                       const std::function<void(const Error&)>& on_fail, bool records, DataStreams out,
                       StreamOpener& opener, std::function<bool()> stopped, std::shared_ptr<HelloGate> gate,
                       const std::string& peer) {
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
    // The gate's backstop: the control connection's connect, its hello and TLS handshake
    // and the verdict each end by the idle timeout (they open or close the gate first).
    const int gate_ms = opts.connect_timeout_ms + 4 * opts.idle_timeout_ms;
    // The lambda's own copy: the argument after it is moved from, in an unspecified order.
    std::function<bool()> gate_stopped = stopped;
    opener.start(c.streams, kParallelOpens, [=, &links](unsigned i) {
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::connecting;
        SendOptions o = opts; // a stream that starts after the gate opened connects under the scaled deadlines
        if (auto p = gate->ready()) o.connect_timeout_ms = p->connect_ms, o.idle_timeout_ms = p->idle_ms;
        const int slot = out.data[i - 1].get();
        UniqueFd fd = open_connection(to, o);
        set_congestion_control(fd.get(), o.congestion_control);
        set_io_timeout(fd.get(), o.idle_timeout_ms);
        // Frames are coalesced where more follows (MSG_MORE, sendfile): a stream's last partial
        // segment (a batch's tail, STREAM_END) held by Nagle until the receiver's delayed ACK
        // stopped an update of small files for 40 ms in about half the runs (session 14).
        set_nodelay(fd.get());
        // Relayed, the TCP connection takes its tcp slot's number (the relay holds that
        // number), and the relay's plain end the data slot's.
        const int tcp_slot = relay ? out.tcp[i - 1].get() : slot;
        take_number(std::move(fd), tcp_slot);
        const wire::ServerHello server = read_server_hello(tcp_slot, peer);
        std::optional<HelloGate::Pass> pass = gate->wait(gate_ms, gate_stopped);
        if (!pass)
            throw Error(ErrorCode::cancelled, "data stream " + std::to_string(i) + " to " + peer +
                                                  " not opened: the control connection did not open");
        set_io_timeout(tcp_slot, pass->idle_ms);
        wire::ClientHello h = pass->hello; // each thread its own copy: the handshake fills in the nonce
        h.role = wire::Role::data;
        h.stream_index = static_cast<uint16_t>(i);
        HelloResult hr = answer_server_hello(tcp_slot, to.token, h, server, peer);
        if (relay) {
            UniqueFd plain = links.secure(tcp_slot, tls::Side::client, hr.psk, peer, i, on_fail);
            take_number(std::move(plain), slot);
        } else if (encrypted) {
            out.keys[i - 1] = links.open_records(slot, tls::Side::client, hr.psk, peer, i);
        }
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::idle;
    }, std::move(stopped));
}

// The control connection from its TCP connect on: a sluice serve's port asked for a push first
// (then `to` and `opts` attach through it), its hello, TLS handshake and the verdict.
void open_control(Connections& c, Endpoint& to, SendOptions& opts, tls::Links& links, wire::ClientHello hello,
                  const std::string& peer, const std::function<void(const Error&)>& on_fail,
                  const std::function<void()>& hello_sent) {
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
    c.control_mptcp = mptcp_of(c.control.get(), 0, opts.mptcp, false);
    set_nodelay(c.control.get());
    // Set before our first byte is written: the handshake frames already go under the chosen algorithm.
    set_congestion_control(c.control.get(), opts.congestion_control);
    set_io_timeout(c.control.get(), opts.idle_timeout_ms);
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
    finish_control(c, to, opts, links, hello, peer, on_fail, hello_sent);
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
    // --streams auto on a LAN or loopback: the default count, no search (StreamGovernor::kMinRttUs).
    // The connect's SYN and SYN-ACK gave the path's first round trip, before the hello names
    // the stream count (a serve's push connects again to the same host: the same path).
    const uint32_t path_us = min_rtt_us(c.control.get());
    c.path_us = path_us;
    c.streams = opts.streams;
    if (opts.streams_auto && path_us < StreamGovernor::kMinRttUs) {
        c.streams = std::min(opts.streams, kDefaultStreams);
        c.auto_fixed = "auto: " + std::to_string(c.streams) + " streams, no search: a path of " + std::to_string(path_us) +
                       " us round trip (under 2 ms, a LAN, where more streams only cost CPU)";
    }
    hello.stream_count = static_cast<uint16_t>(c.streams);
    c.encrypted = tls::wants_encryption(opts.encrypt, c.control.get());
    // The data streams connect once the control connection's hello is on its way, side by side
    // with the rest of its handshake (hello_gate.hpp); their hellos wait at the gate until it
    // and its TLS are done. Not before: the receiver reads a pending connection's hello before it
    // accepts more, and a data connection accepted while the control connection is still
    // pending may evict it where one address holds 16 pending (recv/session/acceptor.cpp).
    // By then a serve's port has granted the push: `to` and `opts` are the push's.
    auto gate = std::make_shared<HelloGate>();
    try {
        open_control(c, to, opts, links, hello, peer, on_fail, [&] {
            open_data_streams(c, to, opts, links, on_fail, records, out, opener, std::move(stopped), gate, peer);
        });
    } catch (...) {
        gate->close(); // the streams opening give up (and the session's stop() ends their sockets)
        throw;
    }
    gate->open({.hello = c.hello, .connect_ms = c.deadlines.connect_ms, .idle_ms = c.deadlines.idle_ms});
    return c;
}

} // namespace sluice
