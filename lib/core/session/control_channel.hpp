#pragma once
// The control connection of a session as both sides use it: frames written whole under one
// lock, read by one thread, and the best-effort ABORT that stops a transfer.
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "core/io/unique_fd.hpp"
#include "core/wire/frame_io.hpp"

namespace sluice {

class ControlChannel {
public:
    // Once, before any other thread uses the channel.
    void attach(UniqueFd fd) { fd_ = std::move(fd); }
    int fd() const { return fd_.get(); }

    // The receiver writes from its control thread and, for RESEND and ALL_VERIFIED, from data
    // threads: frames must never interleave.
    void write(const wire::Bytes& frames, const char* what) {
        std::lock_guard lk(write_mu_);
        write_frame(fd_.get(), frames, what);
    }
    Frame read(const char* what) { return read_frame(fd_.get(), what); }

    // Tells the peer why the transfer stops (ABORT with code), then shuts the connection down
    // so that a thread blocked reading it returns. Best effort: the peer may be gone.
    void abort(uint32_t code, const std::string& why) noexcept;

private:
    UniqueFd fd_;
    std::mutex write_mu_;
};

// Shuts data connections down without closing them (their threads still use the fds), so
// that every thread blocked on one returns.
void shutdown_all(std::span<const UniqueFd> data) noexcept;

} // namespace sluice
