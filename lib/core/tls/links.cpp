#include "core/tls/links.hpp"

#include <unistd.h>

#include "core/io/sys_error.hpp"
#include "core/tls/ktls.hpp"

namespace sluice::tls {

namespace {
constexpr const char* kKernelWhy = "the kernel seals and opens the records (tls ULP)";
} // namespace

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
        why_ = kKernelWhy;
        if (index > 0) streams_ = kStreamsKernel;
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
    if (index > 0) streams_ = kStreamsRelay;
    return plain;
}

std::optional<LinkKeys> Links::open_records(int tcp, Side side, const Psk& psk, const std::string& peer, unsigned index) {
    LinkKeys keys = handshake(tcp, side, psk, peer + " (" + link_name(index) + ")");
    std::string why;
    const bool kernel = attach_ktls(tcp, why);
    if (kernel) install_ktls(tcp, keys);
    std::lock_guard lk(mu_);
    path_ = kernel ? kPathKernel : kPathUser;
    why_ = kernel ? kKernelWhy : why;
    streams_ = kernel ? kStreamsKernel : kStreamsRecords;
    if (kernel) return std::nullopt;
    return keys;
}

std::string streams_text(const std::string& streams) {
    if (streams == kStreamsRecords)
        return "records sealed and opened in place on each stream's own buffer by its send or receive path (no relay); the "
               "control connection through a relay";
    if (streams == kStreamsRelay) return "through a relay (two threads and a socket pair per connection) under an unchanged path";
    if (streams == kStreamsKernel) return "the kernel's TLS under an unchanged path";
    return "none yet";
}

std::string Links::streams() const {
    std::lock_guard lk(mu_);
    return streams_;
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
