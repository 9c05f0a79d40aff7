#include "serve/get/get_port.hpp"

#include "core/io/socket.hpp"
#include "serve/get/ring_gets.hpp"

namespace sluice::serve {

GetPort::GetPort(Shared& sh) {
    UniqueFd listen = listen_tcp(sh.opt.bind_address, sh.opt.port, {.backlog = 1024, .mptcp = sh.opt.get_mptcp});
    port_ = local_port(listen.get());
    ring_ = std::make_unique<RingGets>(sh, attachments_, std::move(listen));
}

GetPort::~GetPort() = default;

void GetPort::run() { ring_->run(); }

} // namespace sluice::serve
