#pragma once
// The sluice port of `sluice serve`: get sessions (codec_get.hpp), at most max_get_sessions
// sending at once. Everything on it is the get ring's (ring_gets.hpp: one thread with its own
// io_uring accepts, reads every request and attach, and sends single files); a get the ring
// does not send goes to a session thread (session_threads.hpp) once its request is read.
#include <cstdint>
#include <memory>

#include "core/io/unique_fd.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/attachments.hpp"

namespace sluice::serve {

class RingGets;

class GetPort {
public:
    // Listens on sh.opt.bind_address:sh.opt.port; throws a network Error naming the port.
    explicit GetPort(Shared& sh);
    ~GetPort();
    uint16_t port() const { return port_; }
    // The get ring, on the caller's thread: until sh.stopping, then until every session has ended.
    void run();

private:
    uint16_t port_ = 0;
    Attachments attachments_;        // the sessions using it end in run(), before it goes
    std::unique_ptr<RingGets> ring_; // after attachments_: goes first (its sessions hold slots)
};

} // namespace sluice::serve
