#pragma once
// The sluice port of `sluice serve`: accepts get sessions (codec_get.hpp), at most
// max_get_sessions at once. A thread per session reads the request; a single file then goes
// to the get ring (ring_gets.hpp: one thread for every such transfer), anything else is sent
// with the public send() on the session's thread (N stream threads, as `sluice send`).
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <thread>

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
    // Accepts until sh.stopping; then cancels the sessions' transfers and joins them.
    void run();

private:
    struct Session {
        std::thread thread;
        std::atomic<bool> done{false};
        std::atomic<bool> cancel{false};
    };
    void reap(bool all);
    static constexpr size_t kRefusingSessions = 16; // beyond max_get_sessions, only to say "busy"

    Shared& sh_;
    UniqueFd listen_;
    uint16_t port_ = 0;
    std::list<std::unique_ptr<Session>> sessions_;
    Attachments attachments_; // the sessions using it are joined in ~GetPort's body, before it goes
    std::unique_ptr<RingGets> ring_; // after attachments_: goes first (its sessions hold slots)
};

// One connection to the sluice port: a get session (hello, request, reply, transfer,
// GET_DONE), or a GET_ATTACH handing the connection to a waiting get's transfer. Never
// throws; counts sessions in sh's get counters.
// Single files go to the get ring (ring, when not null) after the reply; the rest is sent here.
void serve_get_session(Shared& sh, Attachments& att, RingGets* ring, UniqueFd conn, const std::atomic<bool>& cancel,
                       bool busy);

} // namespace sluice::serve
