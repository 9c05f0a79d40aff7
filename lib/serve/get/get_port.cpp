#include "serve/get/get_port.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "serve/get/ring_gets.hpp"

namespace sluice::serve {

GetPort::GetPort(Shared& sh) : sh_(sh) {
    listen_ = listen_tcp(sh.opt.bind_address, sh.opt.port, {.backlog = 1024, .mptcp = sh.opt.get_mptcp});
    port_ = local_port(listen_.get());
    ring_ = std::make_unique<RingGets>(sh, attachments_);
}

GetPort::~GetPort() { reap(true); }

void GetPort::reap(bool all) {
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        Session& s = **it;
        if (all) s.cancel.store(true);
        if (all || s.done.load()) {
            if (s.thread.joinable()) s.thread.join();
            it = sessions_.erase(it);
        } else {
            ++it;
        }
    }
}

void GetPort::run() {
    std::thread ring_thread([this] { ring_->run(); });
    struct Join {
        std::atomic<bool>& stopping;
        std::thread& t;
        ~Join() { // the ring ends once it sees stopping and its sessions have ended
            stopping.store(true);
            t.join();
        }
    } join{sh_.stopping, ring_thread};
    // A poll with a short tick, so stop() is seen without a wake-up fd: this port carries
    // one connection per get, not per request, so the tick costs nothing that matters.
    while (!sh_.stopping.load()) {
        pollfd p{listen_.get(), POLLIN, 0};
        int n = ::poll(&p, 1, 200);
        reap(false);
        if (n <= 0) continue;
        int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) ::poll(nullptr, 0, 100); // out of fds: let sessions end
            continue;
        }
        UniqueFd conn(fd);
        // Over the limit: the client still hears why (GET_REPLY busy), from a session thread
        // of a small second allowance that only refuses; beyond that it is closed at once.
        const bool busy = sessions_.size() >= sh_.opt.max_get_sessions;
        if (busy && sessions_.size() >= sh_.opt.max_get_sessions + kRefusingSessions) {
            sh_.get_sessions.fetch_add(1);
            sh_.get_failed.fetch_add(1);
            continue;
        }
        auto s = std::make_unique<Session>();
        Session* raw = s.get();
        sessions_.push_back(std::move(s));
        raw->thread = std::thread([this, raw, busy, c = std::move(conn)]() mutable {
            serve_get_session(sh_, attachments_, ring_.get(), std::move(c), raw->cancel, busy);
            raw->done.store(true);
        });
    }
    listen_.reset();
    reap(true);
}

} // namespace sluice::serve
