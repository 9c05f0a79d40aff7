#pragma once
// Accepting and authenticating connections (docs/design.md, "Receiver"; docs/protocol.md,
// "Handshake"): one poll() over the listening socket and every pending handshake, so that no
// peer can hold the others up. At most 256 handshakes are pending, each with a 10 s deadline
// (64 x (its connection's round trip + 200 ms) where that is longer, from 2 ms of round trip),
// and at most 16 from one source address (an IPv4 address, an IPv6 /64). When the table is
// full a flood pays for itself: the entry dropped is a random one of the source holding the
// most, never one of the authenticated transfer's own address for another's sake
// (docs/guarantees.md, "A flood of connections").
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <chrono>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/session/session_log.hpp"
#include "core/tls/keys.hpp"
#include "core/wire/protocol.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

class Acceptor {
public:
    // What the acceptor asks of the session it feeds. Called on the thread in run() only.
    class Admission {
    public:
        // False once the transfer has ended, failed or been cancelled: run() returns.
        virtual bool accepting() = 0;
        // The longest poll() may sleep (-1: until something happens).
        virtual int max_wait_ms() = 0;
        // Whether an authenticated peer with this hello may join (ok, other_transfer, bad_stream).
        virtual wire::AuthStatus admit(const wire::ClientHello& h) = 0;
        // The peer encrypts (both sides agreed): psk keys the TLS handshake that follows,
        // which the session runs on the connection's own thread. Called just before join().
        virtual void encrypted(const wire::ClientHello& h, const tls::Psk& psk) = 0;
        // The peer was admitted and told so: its connection now belongs to the session.
        // adopted: this side opened it (adopt()), so a plain-TCP answer was the peer's.
        virtual void join(const wire::ClientHello& h, UniqueFd fd, bool adopted) = 0;
        // After every round of poll(), for the session's own deadlines.
        virtual void after_round() = 0;

    protected:
        ~Admission() = default;
    };

    // Listens (throws network if it cannot); an empty token is replaced by a random one.
    Acceptor(const RecvOptions& opts, SessionLog& log);

    uint16_t port() const { return port_; }
    // The listener's congestion control, which every accepted connection inherits.
    std::string congestion_control() const;
    const std::string& token() const { return token_; }
    // Makes run() look at its session again, from any thread.
    void wake() noexcept;
    // A connection this side opened (Receiver::adopt): handled as an accepted one from the
    // next round of run() on. Any thread; at most kMaxPendingHandshakes wait here (more are closed).
    void adopt(UniqueFd fd);
    // The idle timeout of connections admitted from now on (scaled by the transfer's round
    // trip once its control connection is in: core/io/rtt_deadlines.hpp). On run()'s thread.
    void set_idle_timeout(int ms) noexcept { idle_timeout_ms_ = ms; }
    // Accepts until admission.accepting() is false; throws internal if poll() fails.
    void run(Admission& admission);

private:
    struct Pending;
    void accept_new(std::vector<Pending>& pending);
    // Greets one new connection (ServerHello) and adds it to pending; false if that failed.
    bool greet(UniqueFd fd, const sockaddr_storage& peer, std::vector<Pending>& pending, size_t& dropped, bool adopted);
    void take_adopted(std::vector<Pending>& pending);
    // Makes room for one more pending handshake from `source`; returns how many were dropped.
    size_t make_room(std::vector<Pending>& pending, uint64_t source);
    bool advance_handshake(Admission& admission, Pending& p);
    bool refuse(Pending& p, wire::AuthStatus why);
    void warn_wrong_token(uint64_t source);
    bool accept_stream(Pending& p, const wire::ClientHello& h);

    int idle_timeout_ms_;
    Encrypt encrypt_;
    SessionLog& log_;
    std::string token_;
    UniqueFd listener_;
    uint16_t port_ = 0;
    UniqueFd wake_;
    std::mutex adopted_mu_;
    std::vector<UniqueFd> adopted_; // from adopt(), for run()
    // The source address of the transfer's control connection once it is authenticated: its
    // data streams are never dropped to make room for another source's connections.
    uint64_t transfer_source_ = 0;
    bool have_transfer_source_ = false;
    std::mt19937_64 rng_;
    static constexpr std::chrono::seconds kWrongTokenQuiet{10};
    std::chrono::steady_clock::time_point wrong_token_since_{};
    uint64_t wrong_token_unsaid_ = 0;
};

} // namespace sluice
