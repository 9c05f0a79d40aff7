#include "core/session/control_channel.hpp"

#include <sys/socket.h>

namespace sluice {

void ControlChannel::abort(uint32_t code, const std::string& why) noexcept {
    if (!fd_) return;
    try {
        wire::Bytes out;
        wire::encode_abort(out, wire::Abort{.code = code, .message = why});
        write(out, "aborting");
    } catch (...) {
        // The peer is gone or not reading: the shutdown below still tells it.
    }
    ::shutdown(fd_.get(), SHUT_RDWR);
}

void shutdown_all(std::span<const UniqueFd> data) noexcept {
    for (const auto& d : data)
        if (d) ::shutdown(d.get(), SHUT_RDWR);
}

} // namespace sluice
