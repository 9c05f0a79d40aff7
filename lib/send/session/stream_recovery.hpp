#pragma once
// The sender's half of issue 16's stream reconnect (docs/protocol.md, "Stream reconnect"):
// when a data stream's connection breaks (reset, or closed under it), the stream opens a new connection for the same index, learns from the
// receiver's STREAM_RESUME how many of the blocks it wrote to the old one arrived whole, and
// puts the rest back on the work queue, where any stream takes them. Nothing restarts.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/wire/protocol.hpp"
#include "send/plan/work_queue.hpp"
#include "sluice/error.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

// The blocks written to one stream's current connection, in order.
class StreamLog {
public:
    // Beyond this many blocks on one connection the log stops (its memory stays bounded) and a
    // break of that connection fails the transfer as it did before reconnects.
    static constexpr size_t kMaxBlocks = 1u << 18;

    // One block written, by file id: the log outlives the segments' hold on their files.
    struct Sent {
        uint64_t file_id = 0;
        uint64_t offset = 0;
        uint64_t length = 0;
    };
    void sent(const Segment& s);
    uint64_t blocks() const { return blocks_; }
    uint64_t bytes() const { return bytes_; }
    bool complete() const { return blocks_ == segments_.size(); }
    // The receiver took the first whole.blocks blocks: returns the others, to send again, and
    // starts over for the new connection. Throws protocol if the receiver claims more than
    // was written or bytes that do not match.
    std::vector<Sent> after(const wire::StreamResume& whole, unsigned index);

private:
    std::vector<Sent> segments_;
    uint64_t blocks_ = 0, bytes_ = 0;
};

// Whether a stream's failure is a broken connection that a new one may heal.
bool breaks_connection(const Error& e);
// For a stream waiting for work: throws network (peer_reset) if its connection has broken
// (reset, or closed by the receiver, which never closes a data stream first).
// `doing` says what the stream was doing in the message.
void check_connection(int fd, unsigned index, const char* doing = "while it waited for work");

// --bounded-resend: returns once the receiver's TCP has acknowledged every byte written to fd
// (SIOCOUTQ 0), or at once if stopped(). Throws network (peer_reset) if the connection breaks
// meanwhile (the stream then reopens it), timed_out if nothing more is acknowledged for
// idle_timeout_ms (the receiver stopped reading).
void await_acknowledged(int fd, unsigned index, int idle_timeout_ms, const std::function<bool()>& stopped);

// Opens data stream `index` again with `hello` (the transfer's, features included) and reads
// the receiver's STREAM_RESUME; the new socket takes fd's number (dup2), so every holder of
// the number sends on the new connection. Tries until `deadline` (the receiver may not have
// seen the old connection break yet, and refuses the index until it has), unless stopped().
// Throws network naming the stream, `why` it broke, and the last attempt's error.
wire::StreamResume reopen_stream(int fd, unsigned index, const std::string& why, const Endpoint& to,
                                 const SendOptions& opts, const wire::ClientHello& hello,
                                 std::chrono::steady_clock::time_point deadline, const std::function<bool()>& stopped);

} // namespace sluice
