#include "recv/session/stream_rejoin.hpp"

#include "core/io/socket.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

bool BrokenStreams::heals(const Error& e) {
    if (e.code() != ErrorCode::network) return false;
    // Not timed_out: a sender silent on one stream has not seen a break and would not reopen it.
    return e.cause() == ErrorCause::peer_reset || e.cause() == ErrorCause::peer_closed;
}

void BrokenStreams::broke(unsigned index, const StreamReceipt& whole, const std::string& why) {
    std::lock_guard lk(mu_);
    awaited_[index] = Broken{whole, why, std::chrono::steady_clock::now()};
}

bool BrokenStreams::awaited(unsigned index) const {
    std::lock_guard lk(mu_);
    return awaited_.count(index) != 0;
}

StreamReceipt BrokenStreams::rejoined(unsigned index) {
    std::lock_guard lk(mu_);
    auto it = awaited_.find(index);
    if (it == awaited_.end()) return {};
    StreamReceipt whole = it->second.whole;
    awaited_.erase(it);
    ++reopened_;
    return whole;
}

std::optional<Error> BrokenStreams::overdue(int wait_ms) const {
    std::lock_guard lk(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (const auto& [index, b] : awaited_)
        if (now - b.since >= std::chrono::milliseconds(wait_ms))
            return Error(ErrorCode::network,
                         "data stream " + std::to_string(index) + " broke (" + b.why + ") and the sender did not reopen it within " +
                             std::to_string(wait_ms / 1000) + " s (idle timeout)",
                         ErrorCause::timed_out);
    return std::nullopt;
}

unsigned BrokenStreams::reopened() const {
    std::lock_guard lk(mu_);
    return reopened_;
}

void send_stream_resume(int sock, unsigned index, const StreamReceipt& whole, SessionLog& log) {
    wire::Bytes out;
    wire::encode_stream_resume(out, wire::StreamResume{.blocks = whole.blocks, .bytes = whole.bytes});
    send_all(sock, out, ("resuming data stream " + std::to_string(index)).c_str());
    log.verbose_line("data stream " + std::to_string(index) + " reopened by the sender; it re-sends what followed block " +
                     std::to_string(whole.blocks));
}

} // namespace sluice
