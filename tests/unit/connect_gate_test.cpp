#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "core/io/socket.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"
#include "send/session/connect.hpp"
#include "send/session/hello_gate.hpp"
#include "sluice/error.hpp"

using namespace sluice;

// Issue 16 (h16t): the data streams connect while the control connection's handshake runs, and
// their hellos wait until it is done (send/session/hello_gate.hpp). A receiver played by hand
// on loopback holds the control connection's answer until every data stream has connected: the
// sender from before this change connected them only after that answer (so the receiver's
// accepts would wait out their deadline). No timing is asserted: each wait ends on an event,
// and the deadlines only bound a broken build.

namespace {

constexpr int kWaitMs = 10000;
const std::string kToken = "gate-test-token";

bool readable(int fd, int ms) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    return ::poll(&p, 1, ms) > 0;
}

UniqueFd accept_one(int listener) {
    if (!readable(listener, kWaitMs)) return UniqueFd(-1);
    return UniqueFd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

std::array<unsigned char, wire::kNonceBytes> greet(int fd) {
    wire::ServerHello sh{.features = wire::kFeatureSparse | wire::kFeatureUpdate};
    wire::random_bytes(sh.nonce);
    wire::Bytes out;
    wire::encode_server_hello(out, sh);
    send_all(fd, out, "test receiver's hello");
    return sh.nonce;
}

wire::ClientHello read_hello(int fd) {
    std::array<unsigned char, wire::kClientHelloBytes> b{};
    recv_exact(fd, b, "the sender's hello");
    return wire::decode_client_hello(b);
}

void answer(int fd, wire::AuthStatus status, const wire::ClientHello& h, std::span<const unsigned char> nonce) {
    wire::ServerAuth a{.status = status};
    if (status == wire::AuthStatus::ok) a.mac = wire::server_auth_mac(kToken, h.nonce, nonce);
    wire::Bytes out;
    wire::encode_server_auth(out, a);
    send_all(fd, out, "test receiver's answer");
}

// What the hand-played receiver saw.
struct Seen {
    bool control_first = false;       // the first connection's hello was the control connection's
    unsigned connected_before = 0;    // data streams connected before the control connection was answered
    bool hello_before_answer = false; // a data stream's hello came before that answer
    std::vector<wire::ClientHello> data_hellos;
    wire::ClientHello control;
};

// Accepts the control connection and `streams` data streams before answering the control
// connection with `control_status`; then, if ok, authenticates every data stream.
void play_receiver(int listener, unsigned streams, wire::AuthStatus control_status, Seen& seen) {
    UniqueFd control = accept_one(listener);
    if (!control) return;
    const auto control_nonce = greet(control.get());
    seen.control = read_hello(control.get());
    seen.control_first = seen.control.role == wire::Role::control;
    std::vector<UniqueFd> data;
    std::vector<std::array<unsigned char, wire::kNonceBytes>> nonces;
    while (data.size() < streams) {
        UniqueFd d = accept_one(listener);
        if (!d) break; // the deadline: they were not opened during the control's handshake
        nonces.push_back(greet(d.get()));
        data.push_back(std::move(d));
    }
    seen.connected_before = static_cast<unsigned>(data.size());
    // Their hellos must wait for the control connection's answer. A negative wait: it passes
    // at once on a busy machine, and it catches a sender that does not wait (it sends at once).
    for (UniqueFd& d : data) seen.hello_before_answer |= readable(d.get(), 200);
    answer(control.get(), control_status, seen.control, control_nonce);
    if (control_status != wire::AuthStatus::ok) {
        // A refused control connection: the streams that waited give up without a hello (their
        // connections are the sender's to close; nothing may arrive on them).
        for (UniqueFd& d : data) seen.hello_before_answer |= readable(d.get(), 200);
        return;
    }
    for (size_t i = 0; i < data.size(); ++i) {
        seen.data_hellos.push_back(read_hello(data[i].get()));
        answer(data[i].get(), wire::AuthStatus::ok, seen.data_hellos.back(), nonces[i]);
    }
}

struct Sender {
    StreamOpener opener;
    tls::Links links;
    std::vector<UniqueFd> data, tcp;
    std::vector<std::optional<tls::LinkKeys>> keys;
    std::atomic<bool> stop{false};
    SendOptions opts;
    Endpoint to;

    Sender(uint16_t port, unsigned streams) : to{.host = "127.0.0.1", .port = port, .token = kToken} {
        opts.streams = streams;
        opts.encrypt = Encrypt::off;
        opts.connect_timeout_ms = kWaitMs;
        opts.idle_timeout_ms = kWaitMs;
        opts.connection = [port] { return connect_tcp("127.0.0.1", port, kWaitMs).release(); };
    }
    Connections connect() {
        return connect_transfer(to, opts, links, [](const Error&) {}, true, DataStreams{.data = data, .tcp = tcp, .keys = keys},
                                opener, [this] { return stop.load(); });
    }
    ~Sender() {
        stop = true;
        for (UniqueFd& d : data) ::shutdown(d.get(), SHUT_RDWR);
        opener.join();
    }
};

} // namespace

TEST_CASE("data streams connect during the control connection's handshake and say hello only after it") {
    UniqueFd listener = listen_tcp("127.0.0.1", 0);
    Seen seen;
    std::thread receiver([&] { play_receiver(listener.get(), 3, wire::AuthStatus::ok, seen); });
    Sender s(local_port(listener.get()), 3);
    std::optional<Connections> c;
    try {
        c = s.connect();
    } catch (...) {
        receiver.join();
        throw;
    }
    CHECK(s.opener.await_all([] { return false; }));
    receiver.join();
    CHECK(seen.control_first);
    CHECK(seen.connected_before == 3);
    CHECK_FALSE(seen.hello_before_answer);
    REQUIRE(seen.data_hellos.size() == 3);
    std::vector<bool> index_seen(4, false);
    for (const wire::ClientHello& h : seen.data_hellos) {
        CHECK(h.role == wire::Role::data);
        CHECK(h.transfer_id == seen.control.transfer_id);
        CHECK(h.stream_count == 3);
        // The features the control connection's handshake settled: the receiver's offer, here
        // without the tree metadata or announce window bits the sender asks for.
        CHECK(h.features == c->features);
        REQUIRE(h.stream_index >= 1);
        REQUIRE(h.stream_index <= 3);
        CHECK_FALSE(index_seen[h.stream_index]);
        index_seen[h.stream_index] = true;
    }
    CHECK(c->features == (wire::kFeatureSparse | wire::kFeatureUpdate));
}

TEST_CASE("a refused control connection: the data streams waiting at the gate give up without a hello") {
    UniqueFd listener = listen_tcp("127.0.0.1", 0);
    Seen seen;
    std::thread receiver([&] { play_receiver(listener.get(), 2, wire::AuthStatus::bad_token, seen); });
    {
        Sender s(local_port(listener.get()), 2);
        bool refused = false;
        try {
            s.connect();
        } catch (const Error& e) {
            refused = e.code() == ErrorCode::auth;
        }
        CHECK(refused);
        receiver.join();
        // The opens end (the gate was closed), each with the reason, not a hello.
        CHECK_THROWS_AS(s.opener.await_all([] { return false; }), Error);
        s.opener.join();
    }
    CHECK(seen.connected_before == 2);
    CHECK_FALSE(seen.hello_before_answer);
}

TEST_CASE("the hello gate: a pass once opened, none once closed, none when stopped") {
    HelloGate open_gate;
    CHECK_FALSE(open_gate.ready());
    wire::ClientHello h;
    h.stream_count = 7;
    open_gate.open({.hello = h, .connect_ms = 1, .idle_ms = 2});
    auto p = open_gate.wait(kWaitMs, [] { return false; });
    REQUIRE(p);
    CHECK(p->hello.stream_count == 7);
    CHECK(p->idle_ms == 2);
    open_gate.close(); // after open: the pass stays (a stream that starts late connects under it)
    CHECK(open_gate.ready());

    HelloGate closed;
    std::thread t([&] { closed.close(); });
    CHECK_FALSE(closed.wait(kWaitMs, [] { return false; }));
    t.join();

    HelloGate stopped;
    CHECK_FALSE(stopped.wait(kWaitMs, [] { return true; }));
}
