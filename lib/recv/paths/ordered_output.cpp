#include "recv/paths/ordered_output.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "core/io/pipe.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"

namespace sluice {

OrderedOutput::OrderedOutput(int out_fd) : out_fd_(out_fd) {
    // A whole piece fits the consumer's pipe after this; where the kernel refuses, the stats say so.
    pipe_note_ = grow_pipe(out_fd_, static_cast<int>(1u << 20), "the output");
}
OrderedOutput::OrderedOutput(Sink& sink) : sink_(&sink) {}

void OrderedOutput::set_entry(const SinkEntry& e) {
    std::lock_guard lk(mu_);
    entry_ = e;
}

void OrderedOutput::wait_turn(uint64_t offset, int idle_timeout_ms) {
    using Clock = std::chrono::steady_clock;
    const auto idle = std::chrono::milliseconds(idle_timeout_ms);
    std::unique_lock lk(mu_);
    // Bounded: each round either ends the wait or sleeps up to the idle timeout, and the
    // deadline only moves while the output or the sender makes progress.
    for (;;) {
        if (stopped_) throw Error(ErrorCode::cancelled, "pipe output stopped");
        if (next_ == offset) break;
        const auto arrived = Clock::time_point(Clock::duration(arrived_.load()));
        const auto deadline = std::max(moved_, arrived) + idle;
        const auto now = Clock::now();
        if (!turn_held_ && now >= deadline)
            throw Error(ErrorCode::network,
                        "the byte stream stopped at offset " + std::to_string(next_) + ": no data from the sender for " +
                            timeout_text(idle_timeout_ms) + " while a later piece (offset " + std::to_string(offset) +
                            ") waited for it (idle timeout)",
                        ErrorCause::timed_out);
        cv_.wait_for(lk, turn_held_ ? idle : std::max(deadline - now, Clock::duration(std::chrono::milliseconds(1))));
    }
    turn_held_ = true;
}

void OrderedOutput::end_turn(uint64_t length) {
    {
        std::lock_guard lk(mu_);
        next_ += length;
        turn_held_ = false;
        moved_ = std::chrono::steady_clock::now();
    }
    cv_.notify_all();
}

void OrderedOutput::stop() {
    {
        std::lock_guard lk(mu_);
        stopped_ = true;
    }
    cv_.notify_all();
}

uint64_t OrderedOutput::delivered() const {
    std::lock_guard lk(mu_);
    return next_;
}

std::string OrderedOutput::fallback() const {
    std::lock_guard lk(mu_);
    if (pipe_note_.empty()) return fallback_reason_;
    return fallback_reason_.empty() ? pipe_note_ : fallback_reason_ + "; " + pipe_note_;
}

void OrderedOutput::output_failed(int err) {
    uint64_t at = written_;
    if (err == EPIPE)
        throw Error(ErrorCode::destination, "the output (fd " + std::to_string(out_fd_) + ") was closed by its reader after " +
                                                std::to_string(at) + " bytes of the byte stream");
    throw_errno(ErrorCode::destination,
                "cannot write the byte stream to fd " + std::to_string(out_fd_) + " after " + std::to_string(at) + " bytes", err);
}

// The caller's fd may be non-blocking (a shared pipe); wait for room instead of spinning.
static void wait_writable(int fd) {
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, -1);
}

void OrderedOutput::write_fd_all(const unsigned char* p, size_t n) {
    while (n) {
        ssize_t w = ::write(out_fd_, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) {
            wait_writable(out_fd_);
            continue;
        }
        if (w < 0) output_failed(errno);
        written_ += static_cast<uint64_t>(w);
        p += w;
        n -= static_cast<size_t>(w);
    }
}

void OrderedOutput::drain_pipe(int pipe_read_fd, size_t n) {
    while (n && !copy_fallback_) {
        ssize_t m = ::splice(pipe_read_fd, nullptr, out_fd_, nullptr, n, SPLICE_F_MOVE);
        if (m > 0) {
            written_ += static_cast<uint64_t>(m);
            n -= static_cast<size_t>(m);
            continue;
        }
        if (m < 0 && errno == EINTR) continue;
        if (m < 0 && errno == EAGAIN) {
            wait_writable(out_fd_);
            continue;
        }
        if (m < 0 && errno == EINVAL) {
            // A tty, an O_APPEND file or anything else without splice support.
            std::lock_guard lk(mu_);
            copy_fallback_ = true;
            fallback_reason_ = "pipe output copied through a buffer: fd " + std::to_string(out_fd_) + " does not accept splice";
            break;
        }
        output_failed(m < 0 ? errno : EPIPE);
    }
    while (n) {
        ssize_t r = ::read(pipe_read_fd, bounce_.data(), std::min(n, bounce_.size()));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) throw_errno(ErrorCode::internal, "reading a pipe piece back from its pipe");
        write_fd_all(bounce_.data(), static_cast<size_t>(r));
        n -= static_cast<size_t>(r);
    }
}

void OrderedOutput::write(uint64_t offset, std::span<const unsigned char> data) {
    if (sink_) {
        sink_->write(entry_, offset, std::as_bytes(data));
        written_ += data.size();
        return;
    }
    write_fd_all(data.data(), data.size());
}

} // namespace sluice
