#pragma once
// The get ring: one thread with its own io_uring that runs the transfers of get sessions the
// session threads hand it (single files, clear text: RingSession), all at once, with no thread
// per session. The session threads still read each request (a short step, under the request
// deadline); the transfer, which can last as long as the client takes, is here. A finished
// checksum, a new session and a new attached connection wake the ring through eventfds.
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/attachments.hpp"
#include "serve/get/ring_session.hpp"
#include "serve/get/sum_pool.hpp"

namespace sluice::serve {

class RingGets {
public:
    RingGets(Shared& sh, Attachments& att); // registers its eventfd with att
    ~RingGets();
    // From a session thread: the transfer is the ring's now. False when the ring has ended
    // (the server stops): the caller still owns s and says so to the client.
    bool offer(RingStart& s);
    bool accepting() {
        std::lock_guard lock(mu_);
        return !ended_;
    }
    void run(); // the ring thread: until sh.stopping and every session has ended

private:
    void wake();
    void take_new(int64_t now);

    Shared& sh_;
    Attachments& att_;
    UniqueFd efd_; // offers and attaches
    SumPool pool_;
    std::mutex mu_;
    std::vector<RingStart> incoming_;
    bool ended_ = false; // under mu_: offers refused
    std::vector<std::unique_ptr<RingSession>> sessions_; // by slot; null: free
    std::vector<uint32_t> gens_;
    Ring* ring_ = nullptr; // run()'s, while it runs
};

} // namespace sluice::serve
