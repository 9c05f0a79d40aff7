#pragma once
// The sluice port of `sluice serve`: accepts get sessions (codec_get.hpp) and runs each one's
// transfer with the public send() on a thread of its own, at most max_get_sessions at once.
// Not on the rings yet: a session is a sender like `sluice send`'s (N stream threads).
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <thread>

#include "core/io/unique_fd.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/attachments.hpp"

namespace sluice::serve {

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
};

// One connection to the sluice port: a get session (hello, request, reply, transfer,
// GET_DONE), or a GET_ATTACH handing the connection to a waiting get's transfer. Never
// throws; counts sessions in sh's get counters.
void serve_get_session(Shared& sh, Attachments& att, UniqueFd conn, const std::atomic<bool>& cancel, bool busy);

} // namespace sluice::serve
