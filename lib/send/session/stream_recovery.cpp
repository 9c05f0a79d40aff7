#include "send/session/stream_recovery.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/io/unique_fd.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/frame_io.hpp"
#include "send/session/handshake.hpp"

namespace sluice {

void StreamLog::sent(const Segment& s) {
    if (segments_.size() == blocks_ && segments_.size() < kMaxBlocks)
        segments_.push_back(Sent{.file_id = s.file->file_id, .offset = s.offset, .length = s.length});
    ++blocks_;
    bytes_ += s.length;
}

std::vector<StreamLog::Sent> StreamLog::after(const wire::StreamResume& whole, unsigned index) {
    if (whole.blocks > segments_.size())
        throw Error(ErrorCode::protocol, "receiver says data stream " + std::to_string(index) + " delivered " +
                                             std::to_string(whole.blocks) + " blocks; " + std::to_string(blocks_) +
                                             " were written to it");
    uint64_t bytes = 0;
    for (size_t k = 0; k < whole.blocks; ++k) bytes += segments_[k].length;
    if (bytes != whole.bytes)
        throw Error(ErrorCode::protocol, "receiver says data stream " + std::to_string(index) + " delivered " +
                                             std::to_string(whole.bytes) + " bytes in " + std::to_string(whole.blocks) +
                                             " blocks; those blocks hold " + std::to_string(bytes));
    std::vector<Sent> rest(segments_.begin() + static_cast<long>(whole.blocks), segments_.end());
    segments_.clear();
    blocks_ = bytes_ = 0;
    return rest;
}

bool breaks_connection(const Error& e) {
    if (e.code() != ErrorCode::network) return false;
    // Not timed_out: a receiver that stops reading is the receiver's silence, which the
    // control connection's deadline and the stream's own already judge (send_core.cpp).
    return e.cause() == ErrorCause::peer_reset || e.cause() == ErrorCause::peer_closed;
}

void check_connection(int fd, unsigned index) {
    pollfd p{.fd = fd, .events = POLLRDHUP, .revents = 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP | POLLRDHUP)))
        throw Error(ErrorCode::network, "data stream " + std::to_string(index) + " broke while it waited for work",
                    ErrorCause::peer_reset);
}

wire::StreamResume reopen_stream(int fd, unsigned index, const std::string& why, const Endpoint& to,
                                 const SendOptions& opts, const wire::ClientHello& hello,
                                 std::chrono::steady_clock::time_point deadline, const std::function<bool()>& stopped) {
    // The old connection goes with a reset, not a FIN: a receiver still reading it (our side
    // timed out) sees the break at once instead of waiting for the rest of a block.
    linger hard{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    ::shutdown(fd, SHUT_RDWR);
    const std::string peer = to.host + ":" + std::to_string(to.port);
    auto backoff = std::chrono::milliseconds(50);
    for (;;) {
        try {
            UniqueFd fresh = connect_tcp(to.host, to.port, opts.connect_timeout_ms);
            set_congestion_control(fresh.get(), opts.congestion_control);
            set_io_timeout(fresh.get(), opts.idle_timeout_ms);
            wire::ClientHello h = hello;
            h.role = wire::Role::data;
            h.stream_index = static_cast<uint16_t>(index);
            client_handshake(fresh.get(), to.token, h, peer);
            Frame f = read_frame(fresh.get(), "reopening a data stream");
            if (f.type() != wire::FrameType::stream_resume)
                throw Error(ErrorCode::protocol, std::string("receiver answered a reopened data stream with ") +
                                                     wire::frame_type_name(f.header.type) + ", not STREAM_RESUME");
            wire::StreamResume r = wire::decode_stream_resume(f.payload);
            if (::dup2(fresh.get(), fd) < 0) throw Error(ErrorCode::internal, "dup2 failed reopening a data stream");
            return r;
        } catch (const Error& e) {
            if (e.code() == ErrorCode::protocol) throw;
            if (stopped() || std::chrono::steady_clock::now() + backoff >= deadline)
                throw Error(ErrorCode::network,
                            "data stream " + std::to_string(index) + " broke (" + why +
                                ") and could not be reopened within --retry-for: " + e.what(),
                            e.cause());
        }
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
}

} // namespace sluice
