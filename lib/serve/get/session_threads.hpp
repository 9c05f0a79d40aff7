#pragma once
// The session threads of `sluice serve`'s sluice port: get sessions the get ring does not send
// itself (trees, --connect-back, --get-rate-limit, ...), each on a thread of its own that runs
// the public send() (1 + N threads), started by the ring once it has read the request. Joined
// when they end (reap), all cancelled and joined when the server stops.
#include <atomic>
#include <list>
#include <memory>
#include <thread>

#include "serve/get/attachments.hpp"
#include "serve/get/judge.hpp"

namespace sluice::serve {

struct Shared;

class SessionThreads {
public:
    SessionThreads(Shared& sh, Attachments& att) : sh_(sh), att_(att) {}
    ~SessionThreads() { stop(); }
    SessionThreads(const SessionThreads&) = delete;
    SessionThreads& operator=(const SessionThreads&) = delete;

    // False when no thread could be made: a's connection is closed then (the caller counts it failed).
    bool start(Asked& a);
    void reap(); // joins the threads that have ended
    void stop(); // cancels every transfer and joins

private:
    struct One {
        std::thread thread;
        std::atomic<bool> done{false};
        std::atomic<bool> cancel{false};
    };
    Shared& sh_;
    Attachments& att_;
    std::list<std::unique_ptr<One>> list_;
};

// The session itself (get_session.cpp): the checks, GET_REPLY, send(), GET_DONE. Never throws;
// counts the session in sh's get counters.
void serve_get_session(Shared& sh, Attachments& att, Asked a, const std::atomic<bool>& cancel);

} // namespace sluice::serve
