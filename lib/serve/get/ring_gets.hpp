#pragma once
// A get ring: one thread with its own io_uring and its own listening socket on the sluice port
// of `sluice serve` (one ring per --threads, SO_REUSEPORT: the kernel spreads connections).
// It accepts (multishot), reads each connection's first frame (RingRequest: no thread per
// connection), hands attached connections to the get waiting for them (on whichever ring:
// Attachments wakes that ring's eventfd), answers requests, and runs the transfers of the gets
// it sends (RingSession: files and trees, attached or connected back, in clear, encrypted or in
// certificate mode), all at once, with no thread per connection or per session, and receives
// the data streams of the pushes it admitted (PushStreams). A tree is
// walked on the ring's pool (it may wait for the disk). A finished checksum or walk wakes the
// ring through its pool's eventfd.
#include <memory>
#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/attachments.hpp"
#include "serve/get/ring_request.hpp"
#include "serve/get/push_sessions.hpp"
#include "serve/get/push_streams.hpp"
#include "serve/get/ring_session.hpp"
#include "serve/get/sum_pool.hpp"

namespace sluice::serve {

class RingGets {
public:
    RingGets(Shared& sh, Attachments& att, UniqueFd listen, unsigned pool_threads);
    ~RingGets();
    // On the caller's thread: until sh.stopping, then until every session has ended.
    void run();

private:
    void arm_accept();
    void on_accept(Completion& c, int64_t now);
    void after(uint32_t slot, int64_t now); // acts on what request `slot` came to
    void on_request(RingRequest& r, uint32_t slot);
    void on_walked(uint32_t slot);                                 // a tree's walk is back from the pool
    void answer(RingRequest& r, Judged j, Admission admission); // the reply, and the session it starts
    void on_tls(RingRequest& r); // began TLS: its --max-gets place, then its handshake on the ring (or closed)
    void start_session(RingStart s, int64_t now);

    Shared& sh_;
    Attachments& att_;
    UniqueFd listen_;
    UniqueFd efd_; // written by Attachments when a connection for one of this ring's gets came in
    SumPool pool_;
    PushStreams push_streams_; // the data streams of pushes admitted on this ring, received on it
    PushSessions pushes_; // pushes admitted on this ring (h15s): their control on two threads each
    std::vector<std::unique_ptr<RingSession>> sessions_; // by slot; null: free
    std::vector<uint32_t> gens_;
    std::vector<std::unique_ptr<RingRequest>> requests_; // by slot; null: free
    size_t waiting_ = 0;                                  // requests_ not null
    Ring* ring_ = nullptr; // run()'s, while it runs
    Completion accept_c_;
    bool accept_multishot_ = true, accept_retry_ = false, stopping_ = false;
};

} // namespace sluice::serve
