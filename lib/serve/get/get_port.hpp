#pragma once
// The sluice port of `sluice serve`: get sessions (codec_get.hpp), at most max_get_sessions
// sending at once. Everything on it is the get rings' (ring_gets.hpp: one thread with its own
// io_uring and its own listening socket per --threads, SO_REUSEPORT; each accepts, reads every
// request and attach, and sends every get: ring_session.hpp), no thread per session.
#include <cstdint>
#include <memory>
#include <vector>

#include "serve/engine/shared.hpp"
#include "serve/get/attachments.hpp"

namespace sluice::serve {

class RingGets;

class GetPort {
public:
    // Listens on sh.opt.bind_address:sh.opt.port, once per ring; throws a network Error naming the port.
    explicit GetPort(Shared& sh);
    ~GetPort();
    uint16_t port() const { return port_; }
    // The get rings, one on the caller's thread and the others on threads of their own: until
    // sh.stopping, then until every session has ended. A ring that fails stops the server
    // (sh.stopping) and its error is thrown here once all have ended.
    void run();

private:
    Shared& sh_;
    uint16_t port_ = 0;
    Attachments attachments_;                   // the sessions using it end in run(), before it goes
    std::vector<std::unique_ptr<RingGets>> rings_; // after attachments_: go first (their sessions hold slots)
};

} // namespace sluice::serve
