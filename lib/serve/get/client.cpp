// sluice::get() (sluice/get.hpp): the client side of a get session. A Receiver listens on an
// ephemeral port with a one-time token; the request tells the server that port and token;
// the server's send() connects back and the Receiver verifies and stores as `sluice recv`
// does (resume included: its journal is keyed by the destination's temporary names). A
// thread waits on the request connection for GET_DONE, so a server-side failure (or the
// server vanishing) cancels the Receiver instead of leaving it to its idle timeout.
// Certificate mode (GetOptions::certificates): the request connection first runs a TLS 1.3
// handshake that verifies the server's certificate, and its frames travel in records after it.
#include "sluice/get.hpp"

#include <sys/socket.h>

#include <mutex>
#include <optional>
#include <thread>

#include "core/io/mptcp.hpp"
#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/tls/cert.hpp"
#include "core/tls/policy.hpp"
#include "core/tls/relay.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec_get.hpp"

namespace sluice {

namespace {

using wire::GetStatus;

template <typename T, typename Decode>
T read_get_frame(int fd, uint8_t type, const char* what, Decode decode) {
    unsigned char h[wire::kFrameHeaderBytes];
    recv_exact(fd, h, what);
    wire::Bytes payload(wire::decode_get_frame_header(h, type));
    recv_exact(fd, payload, what);
    return decode(wire::Span(payload));
}

ErrorCode code_of(GetStatus s) {
    switch (s) {
    case GetStatus::bad_token:
    case GetStatus::certificate_required: return ErrorCode::auth;
    case GetStatus::not_found: return ErrorCode::source;
    case GetStatus::busy: return ErrorCode::network;
    case GetStatus::ok:
    case GetStatus::bad_request:
    case GetStatus::missing_feature: break;
    }
    return ErrorCode::protocol;
}

// GET_DONE's status is 1 + the server's ErrorCode; anything else is the server's bug.
ErrorCode code_of_done(uint32_t status) {
    if (status >= 1 && status <= 1 + static_cast<uint32_t>(ErrorCode::internal)) return static_cast<ErrorCode>(status - 1);
    return ErrorCode::protocol;
}

std::string strip_slashes(const std::string& p) {
    size_t b = p.find_first_not_of('/');
    if (b == std::string::npos) return {};
    size_t e = p.find_last_not_of('/');
    return p.substr(b, e - b + 1);
}

// What the watcher learned on the request connection while the Receiver ran.
struct Verdict {
    std::mutex mu;
    std::optional<Error> failure;
    void set(Error e) {
        std::lock_guard lock(mu);
        if (!failure) failure = std::move(e);
    }
};

// The transfer's connections, opened out to the server's sluice port one after the other
// (each holds one of the server's session threads only while it says GET_ATTACH), then owned
// by the Receiver, which greets them as if it had accepted them.
void attach_connections(const Endpoint& from, const std::string& server, const std::array<unsigned char, wire::kNonceBytes>& nonce,
                        unsigned count, int timeout_ms, bool mptcp, Receiver& rx) {
    wire::Bytes attach;
    wire::encode_get_attach(attach, nonce);
    for (unsigned i = 0; i < count; ++i) {
        UniqueFd fd = connect_tcp(from.host, from.port, timeout_ms, mptcp);
        set_io_timeout(fd.get(), timeout_ms);
        auto hello = read_get_frame<wire::GetHello>(fd.get(), wire::kGetHello, "GET_HELLO", wire::decode_get_hello);
        if (!(hello.features & wire::kFeatureGetSessions))
            throw Error(ErrorCode::protocol, "server " + server + " lacks feature bit 5 (get sessions)");
        send_all(fd.get(), attach, "GET_ATTACH");
        set_io_timeout(fd.get(), 0); // as an accepted connection: the Receiver sets its own deadlines
        rx.adopt(fd.release());
    }
}

// GET_REPLY's MAC (h18p): bound (over the hello's features as this side saw them) when the
// hello offered bound transfer tokens, else the old one. Any mismatch ends the get before a
// stream is opened or the receiver admits anything (it handshakes only in wait()).
void check_reply_mac(const std::string& token, std::span<const unsigned char> nonce, const wire::GetHello& hello,
                     bool offered, const wire::Mac& got, const std::string& server) {
    const wire::Mac want = offered ? wire::get_reply_mac(token, nonce, hello.nonce, hello.features)
                                   : wire::server_auth_mac(token, nonce, hello.nonce);
    if (wire::macs_equal(want, got)) return;
    // A server that offers sent its hello with the bit: a MAC over that says the hello we read lost it.
    if (!offered && wire::macs_equal(wire::get_reply_mac(token, nonce, hello.nonce,
                                                         hello.features | wire::kFeatureGetBoundTransfer),
                                     got))
        throw Error(ErrorCode::auth, "server " + server + ": the GET_HELLO was altered on the way (its offer of bound "
                                     "transfer tokens was removed): a man in the middle? nothing was transferred");
    throw Error(ErrorCode::auth, "server " + server + " did not prove it holds the token (or the GET_HELLO was altered "
                                 "on the way); nothing was transferred");
}

} // namespace

Stats get(const Endpoint& from, const std::string& remote_path, const std::filesystem::path& dest, const GetOptions& o) {
    if (o.streams == 0 || o.streams > wire::kMaxStreams)
        throw Error(ErrorCode::usage, "streams: " + std::to_string(o.streams) + " (1 to " + std::to_string(wire::kMaxStreams) + ")");
    const std::string path = strip_slashes(remote_path);
    if (!path.empty()) {
        try {
            wire::validate_relative_path(path);
        } catch (const Error& e) {
            throw Error(ErrorCode::usage, std::string("remote path: ") + e.what());
        }
    }
    const std::string server = from.host + ":" + std::to_string(from.port);
    // Certificate mode: the files are checked before anything is asked of the server.
    std::unique_ptr<tls::CertContext> certs;
    const Encrypt encrypt = tls::with_certificates(o.encrypt, o.certificates); // on: the transfer's PSK is what binds it
    if (o.certificates.any()) {
        if (o.certificates.ca_file.empty() && o.certificates.pins.empty())
            throw Error(ErrorCode::usage, "certificate mode: sluice get needs --ca FILE or --pin sha256:HEX to verify the "
                                          "server (--cert, --key and --crl go with them)");
        certs = std::make_unique<tls::CertContext>(o.certificates, tls::Side::client);
    }

    RecvOptions ro;
    // Connecting out, the Receiver's own port is not used: kept off the network.
    ro.bind_address = o.connect_back ? o.bind_address : "127.0.0.1";
    // One-time: admits only the sender this request asks for. With a token (h18p), the
    // receiver's is the bound transfer token, which the request never carries: an active man
    // in the middle reads receiver_token in clear but cannot compute this without the token.
    wire::GetRequest q;
    wire::random_bytes(q.nonce);
    const std::string receiver_token = wire::random_token();
    const std::string bound = from.token.empty() ? receiver_token : wire::get_transfer_token(from.token, q.nonce, receiver_token);
    ro.token = bound;
    ro.path = o.path;
    ro.sync = o.sync;
    ro.verify = o.verify;
    ro.confine_links = true; // the server is not ours to trust: no link in dest may lead out of it
    ro.idle_timeout_ms = o.idle_timeout_ms;
    ro.mptcp = o.mptcp;
    ro.encrypt = encrypt;
    ro.verbose = o.verbose;
    ro.log = o.log;
    ro.progress = o.progress;
    Receiver rx(dest, ro); // checks dest before anything is asked of the server

    UniqueFd conn = connect_tcp(from.host, from.port, o.connect_timeout_ms, o.mptcp);
    if (o.mptcp && o.verbose && o.log) {
        const ConnectionMptcp m = mptcp_of(conn.get(), 0, true, false);
        o.log("mptcp: the request connection: " + (m.mptcp ? std::string("MPTCP") : "plain TCP: " + m.why));
    }
    // Until the transfer starts, each step is a round trip or two: scaled with the one the
    // TCP handshake measured (core/io/rtt_deadlines.hpp), like every later deadline.
    const int step_ms = rtt_scaled_ms(o.connect_timeout_ms, smoothed_rtt_us(conn.get()));
    set_io_timeout(conn.get(), step_ms);
    wire::GetHello hello;
    try {
        hello = read_get_frame<wire::GetHello>(conn.get(), wire::kGetHello, "GET_HELLO", wire::decode_get_hello);
    } catch (const Error& e) {
        // An HTTP port, or a receiver's, says nothing first: name the likely mistake.
        if (e.cause() != ErrorCause::timed_out) throw;
        throw Error(e.code(), "server " + server + ": " + e.what() + " (is it the port `sluice serve --port` printed?)", e.cause());
    }
    if (!(hello.features & wire::kFeatureGetSessions))
        throw Error(ErrorCode::protocol, "server " + server + " lacks feature bit 5 (get sessions)");
    if (hello.token_required && from.token.empty())
        throw Error(ErrorCode::usage, "server " + server + " requires a token (give ?token= in the URL, or a token file)");
    // A hello that asks no token is what a man in the middle would send to skip every MAC: a
    // client given a token wants the server to prove it holds it (h18p).
    if (!hello.token_required && !from.token.empty())
        throw Error(ErrorCode::auth, "server " + server + " does not ask for a token, so it cannot prove it holds yours: "
                                     "a --public server (get it with no token: no ?token=, --token, --token-file or "
                                     "SLUICE_TOKEN; --ca/--pin to verify it) or a man in the middle; nothing was asked");
    // The server offers bound transfer tokens (GET_HELLO bit 7): the request carries
    // receiver_token and both ends key the transfer with the token bound from it. Without the
    // offer (a server from before) the request carries that token itself, as before; the reply's
    // MAC then tells whether the offer was removed on the way (checked below, before any stream).
    const bool offered = hello.token_required && (hello.features & wire::kFeatureGetBoundTransfer);
    // The receiver decides each connection by the server's address (or the option), as this
    // request's connection sees it: told to the server for its send() (a session thread).
    const bool encrypted = tls::wants_encryption(encrypt, conn.get());

    // Certificate mode: from here the request connection is a relay's plain end (its records
    // sealed and opened by the relay's threads); fd is the one every later frame uses.
    Verdict broke; // why the relay's connection failed (a refusal of our certificate is an alert)
    std::unique_ptr<tls::Relay> relay;
    UniqueFd plain;
    int fd = conn.get();
    if (certs) {
        if (!(hello.features & wire::kFeatureGetCertificate))
            throw Error(ErrorCode::auth, "server " + server + " has no certificate on its sluice port (it was not started "
                                         "with --cert and --key): the request is not sent unauthenticated (--ca and --pin "
                                         "verify a server; without them the server is not verified)");
        tls::CertOutcome r = certs->handshake(conn.get(), from.host, "server " + server);
        if (o.verbose && o.log)
            o.log("server " + server + ": certificate verified (" +
                  (o.certificates.ca_file.empty() ? std::string("--pin") : "--ca " + o.certificates.ca_file) + "), key " +
                  r.peer_spki + "; the request connection is TLS 1.3");
        relay = std::make_unique<tls::Relay>(std::move(conn), r.keys, "the get request connection",
                                             [&broke](const Error& e) { broke.set(e); });
        plain = relay->take_plain();
        fd = plain.get();
        set_io_timeout(fd, step_ms);
    } else if ((hello.features & wire::kFeatureGetCertificate) && o.verbose && o.log) {
        o.log("server " + server + " has a certificate on its sluice port; this get does not verify it (give --ca FILE or "
              "--pin sha256:HEX to)");
    }
    auto relay_failure = [&broke]() -> std::optional<Error> {
        std::lock_guard lock(broke.mu);
        return broke.failure;
    };

    q.streams = static_cast<uint16_t>(o.streams);
    q.features |= encrypted ? wire::kGetEncrypted : wire::kGetClear;
    if (hello.token_required) q.features |= wire::kGetBoundTransfer; // always: so a stripped offer is seen
    q.reply_port = o.connect_back ? rx.port() : 0;
    q.receiver_token = offered ? receiver_token : bound;
    q.path = path;
    wire::Bytes req;
    encode_get_request(req, q);
    if (hello.token_required) {
        wire::Mac mac = wire::client_hello_mac(from.token, hello.nonce, wire::get_request_signed_part(req));
        std::copy(mac.begin(), mac.end(), req.end() - static_cast<long>(mac.size()));
    }
    wire::GetReply reply;
    try {
        send_all(fd, req, "GET_REQUEST");
        reply = read_get_frame<wire::GetReply>(fd, wire::kGetReply, "GET_REPLY", wire::decode_get_reply);
    } catch (const Error&) {
        if (std::optional<Error> why = relay_failure()) throw *why; // e.g. the server refused our certificate
        throw;
    }
    if (reply.status != GetStatus::ok)
        throw Error(code_of(reply.status),
                    "server " + server + ": " + wire::get_status_text(reply.status) + ": " + reply.message +
                        (reply.status == GetStatus::bad_request && reply.message.find("reply port 0") != std::string::npos
                             ? " (a server from before GET_ATTACH: use --connect-back)"
                             : ""));
    if (hello.token_required) check_reply_mac(from.token, q.nonce, hello, offered, wire::Mac(reply.mac), server);
    if (o.log && !reply.message.empty()) o.log("server " + server + ": " + reply.message);
    if (o.verbose && o.log)
        o.log("getting " + std::to_string(reply.files) + " files, " + std::to_string(reply.bytes) + " bytes from " + server);

    if (!o.connect_back) attach_connections(from, server, q.nonce, 1 + o.streams, step_ms, o.mptcp, rx);

    // No deadline on GET_DONE itself: the transfer's liveness is the Receiver's idle timeout.
    set_io_timeout(fd, 0);
    Verdict verdict;
    std::thread watcher([&] {
        try {
            // A tick, so that a cancel from the caller is seen while the server is quiet.
            while (!wait_readable_for(fd, 200)) {
                if (o.cancel && o.cancel->load()) {
                    rx.cancel();
                    return;
                }
            }
            auto done = read_get_frame<wire::GetDone>(fd, wire::kGetDone, "GET_DONE", wire::decode_get_done);
            if (done.status == 0) return;
            verdict.set(Error(code_of_done(done.status), "server " + server + ": " + done.message, ErrorCause::peer_aborted));
        } catch (const Error& e) {
            if (std::optional<Error> why = relay_failure()) verdict.set(*why);
            verdict.set(Error(e.code(), "server " + server + ": the get connection ended before GET_DONE: " + e.what(), e.cause()));
        }
        rx.cancel();
    });
    struct Join {
        std::thread& t;
        int fd;
        ~Join() {
            ::shutdown(fd, SHUT_RDWR); // wakes the watcher if the Receiver ended first
            t.join();
        }
    };
    try {
        Join join{watcher, fd};
        return rx.wait();
    } catch (const Error& e) {
        std::lock_guard lock(verdict.mu);
        if (e.code() == ErrorCode::cancelled && verdict.failure) throw *verdict.failure;
        throw;
    }
}

} // namespace sluice
