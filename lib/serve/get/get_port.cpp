#include "serve/get/get_port.hpp"

#include <exception>
#include <mutex>
#include <thread>

#include "core/io/socket.hpp"
#include "serve/get/push_sessions.hpp"
#include "serve/get/ring_gets.hpp"

namespace sluice::serve {

namespace {

// Pool threads per get ring (each ring its own SumPool). A pool thread holds one block at a
// time, asked for whole (WILLNEED) and then read, hashed and sealed, so this is the number of
// disk reads a ring has in flight for cold blocks, and of blocks it hashes or seals at once on
// other CPUs; the ring's loop itself never waits on the disk. One per ring (cold_read_threads
// split among the rings, as before) read a cold file one block at a time: 0.39-0.88x the
// session threads' rate, each of which has a read of its own in flight; 4 gave 1.10-1.50x
// that, encrypted (h15j, benchmarks.md). Threads rather than io_uring reads from the pool:
// each job is read + hash (+ seal), CPU work that a thread per job also spreads over the
// server's cores, and a read-only ring would still need a thread to hash what it read. Four:
// 4 MiB encrypted (32 MiB clear) in flight per ring, several ms of a disk's latency at the
// ~1 GB/s one ring sends; a session puts at most one job per stream (and one more) in the pool,
// so more threads would wait idle for all but many-stream loads, each with a 1 MiB buffer.
// Bounded per ring, whatever the load: 4 x --threads threads in all.
constexpr unsigned kPoolPerRing = 4;

} // namespace

GetPort::GetPort(Shared& sh) : sh_(sh) {
    const unsigned n = std::max(1u, sh.opt.threads);
    const unsigned pool = kPoolPerRing;
    for (unsigned i = 0; i < n; ++i) {
        UniqueFd listen = listen_tcp(sh.opt.bind_address, i == 0 ? sh.opt.port : port_,
                                     {.backlog = 1024, .reuse_port = true, .mptcp = sh.opt.get_mptcp});
        if (i == 0) port_ = local_port(listen.get());
        rings_.push_back(std::make_unique<RingGets>(sh, attachments_, std::move(listen), pool));
    }
    std::lock_guard lock(sh_.paths_mu);
    sh_.get_path = std::to_string(n) + " get ring" + (n > 1 ? "s" : "") +
                   " (one thread each, SO_REUSEPORT): every request read, attach and refusal; files and trees (paced by --get-rate-limit) to clients "
                   "that attach or that ask the server to connect back (--connect-back: connected out by the ring), in clear or "
                   "encrypted as the client's receiver asks (TLS 1.3 handshake stepped on the "
                   "ring, records sealed on the ring, or on the pool for blocks not in the page cache: " +
                   std::to_string(pool) + " pool threads per ring, as many block reads in flight), certificate mode's handshake "
                   "and request records stepped on the ring too, with no thread per connection or session";
    sh_.push_path = sh.opt.allow_upload ? push_path_text(sh.opt.max_pushes) : "none: pushes need --allow-upload";
    sh_.push_metadata = sh.opt.allow_upload ? push_trust_text(sh.opt.push_trust) : "none: pushes need --allow-upload";
}

GetPort::~GetPort() = default;

void GetPort::run() {
    std::mutex mu;
    std::exception_ptr first;
    auto one = [&](RingGets& r) {
        try {
            r.run();
        } catch (...) {
            std::lock_guard lock(mu);
            if (!first) first = std::current_exception();
            sh_.stopping.store(true); // the others drain; Server::run then reports this error
        }
    };
    std::vector<std::thread> others;
    for (size_t i = 1; i < rings_.size(); ++i) others.emplace_back(one, std::ref(*rings_[i]));
    one(*rings_[0]);
    for (auto& t : others) t.join();
    if (first) std::rethrow_exception(first);
}

} // namespace sluice::serve
