#pragma once
// Accepting and authenticating connections (docs/design.md, "Receiver"; docs/protocol.md,
// "Handshake"): one poll() over the listening socket and every pending handshake, so that no
// peer can hold the others up. At most 256 handshakes are pending, each with a 10 s deadline.
#include <atomic>
#include <cstdint>
#include <deque>
#include <string>

#include "core/io/unique_fd.hpp"
#include "core/session/session_log.hpp"
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
        // The peer was admitted and told so: its connection now belongs to the session.
        virtual void join(const wire::ClientHello& h, UniqueFd fd) = 0;
        // After every round of poll(), for the session's own deadlines.
        virtual void after_round() = 0;

    protected:
        ~Admission() = default;
    };

    // Listens (throws network if it cannot); an empty token is replaced by a random one.
    Acceptor(const RecvOptions& opts, SessionLog& log);

    uint16_t port() const { return port_; }
    const std::string& token() const { return token_; }
    // Makes run() look at its session again, from any thread.
    void wake() noexcept;
    // Accepts until admission.accepting() is false; throws internal if poll() fails.
    void run(Admission& admission);

private:
    struct Pending;
    void accept_new(std::deque<Pending>& pending);
    bool advance_handshake(Admission& admission, Pending& p);
    bool refuse(Pending& p, wire::AuthStatus why);
    bool accept_stream(Pending& p, const wire::ClientHello& h);

    int idle_timeout_ms_;
    SessionLog& log_;
    std::string token_;
    UniqueFd listener_;
    uint16_t port_ = 0;
    UniqueFd wake_;
};

} // namespace sluice
