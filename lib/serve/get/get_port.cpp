#include "serve/get/get_port.hpp"

#include <exception>
#include <mutex>
#include <thread>

#include "core/io/socket.hpp"
#include "serve/get/ring_gets.hpp"

namespace sluice::serve {

GetPort::GetPort(Shared& sh) : sh_(sh) {
    const unsigned n = std::max(1u, sh.opt.threads);
    // The checksum and sealing pool is split among the rings: as many threads in all as before.
    const unsigned pool = std::max(1u, sh.opt.cold_read_threads / n);
    for (unsigned i = 0; i < n; ++i) {
        UniqueFd listen = listen_tcp(sh.opt.bind_address, i == 0 ? sh.opt.port : port_,
                                     {.backlog = 1024, .reuse_port = true, .mptcp = sh.opt.get_mptcp});
        if (i == 0) port_ = local_port(listen.get());
        rings_.push_back(std::make_unique<RingGets>(sh, attachments_, std::move(listen), pool));
    }
    std::lock_guard lock(sh_.paths_mu);
    sh_.get_path = std::to_string(n) + " get ring" + (n > 1 ? "s" : "") +
                   " (one thread each, SO_REUSEPORT): every request read, attach and refusal; single files to clients "
                   "that attach, in clear or encrypted as the client's receiver asks (TLS 1.3 handshake stepped on the "
                   "ring, records sealed on the ring, or on the pool for blocks not in the page cache), with no thread per connection or session; session "
                   "threads: trees, --connect-back, --get-rate-limit";
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
