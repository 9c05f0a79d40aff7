#include "serve/get/attachments.hpp"

#include <unistd.h>

namespace sluice::serve {

std::unique_ptr<Attachments::Slot> Attachments::open(const GetNonce& n, unsigned count, const std::string& host, int notify) {
    auto w = std::make_shared<Waiting>();
    w->left = count;
    w->host = host;
    w->notify = notify;
    std::lock_guard lock(mu_);
    if (!waiting_.emplace(n, w).second) return nullptr;
    return std::make_unique<Slot>(*this, n, std::move(w));
}

std::unique_ptr<Attachments::Slot> Attachments::open_to(const GetNonce& n, unsigned count, const std::string& host,
                                                        std::function<void(UniqueFd)> deliver) {
    auto w = std::make_shared<Waiting>();
    w->left = count;
    w->host = host;
    w->deliver = std::move(deliver);
    std::lock_guard lock(mu_);
    if (!waiting_.emplace(n, w).second) return nullptr;
    return std::make_unique<Slot>(*this, n, std::move(w));
}

bool Attachments::attach(const GetNonce& n, UniqueFd fd, const std::string& host) {
    std::shared_ptr<Waiting> w;
    {
        std::lock_guard lock(mu_);
        auto it = waiting_.find(n);
        if (it == waiting_.end()) return false;
        w = it->second;
    }
    {
        std::lock_guard lock(w->mu);
        if (host != w->host) return false;
        // A push's receiver authenticates each connection itself, and its handshake table bounds
        // those not through it yet (at most 16 per source, each under a deadline: acceptor.hpp).
        // Counted here, junk attached with the push's nonce (it travels in clear in the request)
        // used up the places of the pusher's own streams, which were then refused.
        if (w->deliver) { // no ring to wake
            w->deliver(std::move(fd));
            return true;
        }
        if (w->left == 0) return false;
        --w->left;
        w->fds.push_back(std::move(fd));
    }
    if (w->notify >= 0) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(w->notify, &one, sizeof one);
    }
    return true;
}

Attachments::Slot::~Slot() {
    {
        std::lock_guard lock(a_.mu_);
        a_.waiting_.erase(nonce_); // connections not taken close with w_
    }
    std::lock_guard lock(w_->mu); // an attach() past the lookup above finds no receiver now
    w_->deliver = nullptr;
}

UniqueFd Attachments::Slot::try_take() {
    std::lock_guard lock(w_->mu);
    if (w_->fds.empty()) return UniqueFd();
    UniqueFd fd = std::move(w_->fds.front());
    w_->fds.pop_front();
    return fd;
}

} // namespace sluice::serve
