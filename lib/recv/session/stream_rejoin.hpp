#pragma once
// The receiver's half of issue 16's stream reconnect (docs/protocol.md, "Stream reconnect"):
// a data stream whose connection breaks, in a transfer whose sender said it reopens streams
// (ClientHello feature bit 4), is not a failure. What the broken connection delivered whole
// is kept here until the sender's new connection for that stream index arrives and is told
// (STREAM_RESUME); a stream not reopened within the idle timeout fails the transfer.
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/session/session_log.hpp"
#include "recv/paths/stream_receiver.hpp"
#include "sluice/error.hpp"

namespace sluice {

class BrokenStreams {
public:
    // A network failure of a data stream's connection that a reconnect may heal (it was
    // reset or closed under us), as opposed to silence, a protocol or a disk error.
    static bool heals(const Error& e);

    // Stream `index` broke (why: the error); `whole` is what it delivered whole.
    void broke(unsigned index, const StreamReceipt& whole, const std::string& why);
    // Whether a new connection for `index` is awaited (then admission lets it in again).
    bool awaited(unsigned index) const;
    // The new connection is here: what its STREAM_RESUME reports (awaited(index) was true).
    StreamReceipt rejoined(unsigned index);
    // The first stream awaited for longer than wait_ms, as the error that fails the transfer.
    std::optional<Error> overdue(int wait_ms) const;
    // Connections that broke and were reopened so far.
    unsigned reopened() const;

private:
    struct Broken {
        StreamReceipt whole;
        std::string why;
        std::chrono::steady_clock::time_point since;
    };
    mutable std::mutex mu_;
    std::map<unsigned, Broken> awaited_;
    unsigned reopened_ = 0;
};

// Tells the sender on a reopened stream what its broken connection delivered whole.
void send_stream_resume(int sock, unsigned index, const StreamReceipt& whole, SessionLog& log);

} // namespace sluice
