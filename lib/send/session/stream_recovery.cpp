#include "send/session/stream_recovery.hpp"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/io/unique_fd.hpp"
#include "core/wire/codec.hpp"
#include "core/wire/frame_io.hpp"
#include "send/session/connect.hpp"
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

void check_connection(int fd, unsigned index, const char* doing) {
    pollfd p{.fd = fd, .events = POLLRDHUP, .revents = 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP | POLLRDHUP)))
        throw Error(ErrorCode::network, "data stream " + std::to_string(index) + " broke " + doing, ErrorCause::peer_reset);
}

void await_acknowledged(int fd, unsigned index, int idle_timeout_ms, const std::function<bool()>& stopped) {
    using namespace std::chrono;
    auto deadline = steady_clock::now() + milliseconds(idle_timeout_ms);
    int last = -1;
    for (;;) {
        int outq = 0; // written and not yet acknowledged (TCP: write_seq - snd_una)
        if (::ioctl(fd, SIOCOUTQ, &outq) != 0 || outq <= 0) return; // an error is the next write's to find
        check_connection(fd, index, "while its blocks were acknowledged (--bounded-resend)"); // reopen, not wait
        if (stopped()) return;
        if (outq != last) deadline = steady_clock::now() + milliseconds(idle_timeout_ms); // progress
        last = outq;
        if (steady_clock::now() >= deadline)
            throw Error(ErrorCode::network,
                        "data stream " + std::to_string(index) + ": the receiver acknowledged nothing for " +
                            std::to_string(idle_timeout_ms / 1000) + " s (idle timeout)",
                        ErrorCause::timed_out);
        // The last bytes are acknowledged about one round trip after they went out: look a
        // few times per round trip, not more often than every 100 us nor less than every 5 ms.
        const uint32_t rtt_us = stream_tcp(fd, index).rtt_us;
        std::this_thread::sleep_for(microseconds(std::clamp<uint32_t>(rtt_us / 8, 100, 5000)));
    }
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
            UniqueFd fresh = open_connection(to, opts);
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
