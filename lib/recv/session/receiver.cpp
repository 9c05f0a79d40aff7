// The public Receiver (docs/api.md): a handle on one RecvSession (recv_session.hpp), which
// serves one transfer into the chosen target.
#include "recv/session/recv_session.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

struct Receiver::Impl {
    Impl(std::unique_ptr<RecvTarget> target, RecvOptions options) : session(std::move(target), std::move(options)) {}
    RecvSession session;
};

Receiver::Receiver(const std::filesystem::path& dir, RecvOptions options)
    : impl_(std::make_unique<Impl>(RecvTarget::directory(dir, options.path), std::move(options))) {}
Receiver::Receiver(Sink& sink, RecvOptions options) : impl_(std::make_unique<Impl>(RecvTarget::sink(sink), std::move(options))) {}
Receiver::Receiver(OutputFd out, RecvOptions options)
    : impl_(std::make_unique<Impl>(RecvTarget::output_fd(out.fd), std::move(options))) {}
Receiver::~Receiver() = default;

std::string Receiver::url() const { return impl_->session.url(); }
uint16_t Receiver::port() const { return impl_->session.port(); }
Stats Receiver::wait() { return impl_->session.wait(); }
void Receiver::cancel() { impl_->session.cancel(); }
void Receiver::adopt(int fd) { impl_->session.adopt(UniqueFd(fd)); }

} // namespace sluice
