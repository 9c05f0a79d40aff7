#include "core/tls/links.hpp"

#include <unistd.h>

#include "core/io/sys_error.hpp"
#include "core/tls/ktls.hpp"

namespace sluice::tls {

std::string link_name(unsigned index) { return index == 0 ? "the control connection" : "data stream " + std::to_string(index); }

UniqueFd Links::secure(int tcp, Side side, const Psk& psk, const std::string& peer, unsigned index,
                       std::function<void(const Error&)> on_fail) {
    LinkKeys keys = handshake(tcp, side, psk, peer + " (" + link_name(index) + ")");
    std::string why;
    if (attach_ktls(tcp, why)) {
        install_ktls(tcp, keys);
        UniqueFd same(::dup(tcp));
        if (!same) throw_errno(ErrorCode::internal, "dup");
        std::lock_guard lk(mu_);
        path_ = kPathKernel;
        why_ = "the kernel seals and opens the records (tls ULP)";
        return same;
    }
    UniqueFd mine(::dup(tcp)); // the relay's own reference: the caller keeps tcp for stats and shutdown
    if (!mine) throw_errno(ErrorCode::internal, "dup");
    auto relay = std::make_unique<Relay>(std::move(mine), keys, link_name(index), std::move(on_fail));
    UniqueFd plain = relay->take_plain();
    std::lock_guard lk(mu_);
    relays_.push_back(std::move(relay));
    path_ = kPathUser;
    why_ = why;
    return plain;
}

std::string Links::path() const {
    std::lock_guard lk(mu_);
    return path_;
}

std::string Links::why() const {
    std::lock_guard lk(mu_);
    return why_;
}

void Links::close() {
    std::vector<std::unique_ptr<Relay>> r;
    {
        std::lock_guard lk(mu_);
        r.swap(relays_);
    }
    r.clear();
}

} // namespace sluice::tls
