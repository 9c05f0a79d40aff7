#pragma once
// Connections a get's client opened to the sluice port for its transfer (GET_ATTACH, when the
// request's reply_port is 0), waiting for that session's sender to take them: the server then
// connects nowhere, so a client behind NAT can get. Keyed by the request's nonce; each get
// takes at most the connections it asked for (1 + streams), from the request's address only.
#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/io/unique_fd.hpp"
#include "core/wire/protocol.hpp"

namespace sluice::serve {

using GetNonce = std::array<unsigned char, wire::kNonceBytes>;

class Attachments {
    struct Waiting {
        std::mutex mu;
        std::deque<UniqueFd> fds;
        unsigned left = 0; // connections this get may still be handed
        std::string host;  // the request's address: an attach from elsewhere is refused
        int notify = -1;   // an eventfd written after each connection handed over (its get ring's)
        // A push's receiver (open_to): each connection goes to it at once instead of fds;
        // cleared by the Slot's end, under mu, so it is never called after.
        std::function<void(UniqueFd)> deliver;
    };

public:
    // A get expecting connections, registered while it lives.
    class Slot {
    public:
        Slot(Attachments& a, const GetNonce& n, std::shared_ptr<Waiting> w) : a_(a), nonce_(n), w_(std::move(w)) {}
        ~Slot();
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;
        // The next connection if one came, else an empty fd; never waits (the get ring).
        UniqueFd try_take();

    private:
        Attachments& a_;
        GetNonce nonce_;
        std::shared_ptr<Waiting> w_;
    };

    // Null when a get with this nonce is already waiting (a replayed or colliding request).
    // notify: an eventfd written after each connection handed over (-1: none), so the get ring
    // that runs the get looks at its slot, whichever ring accepted the connection.
    std::unique_ptr<Slot> open(const GetNonce& n, unsigned count, const std::string& host, int notify = -1);
    // A push (h15s): each connection is handed to deliver on the thread that read its attach
    // (a ring's: deliver must not block; Receiver::adopt only queues it), until the Slot goes.
    // count is not enforced for a push: its receiver's handshake table bounds the connections
    // it has not authenticated (see attach()).
    std::unique_ptr<Slot> open_to(const GetNonce& n, unsigned count, const std::string& host,
                                  std::function<void(UniqueFd)> deliver);
    // Hands fd to the waiting get; false (fd closed) when none waits for it, it came from
    // another address, or the get has all it asked for.
    bool attach(const GetNonce& n, UniqueFd fd, const std::string& host);

private:
    std::mutex mu_;
    std::map<GetNonce, std::shared_ptr<Waiting>> waiting_;
};

} // namespace sluice::serve
