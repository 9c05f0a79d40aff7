#pragma once
// A receive whose data streams are read by someone else's event loop (docs/design.md, "Pushes"):
// `sluice serve`'s get rings receive a push's data streams on their own io_uring instead of a
// thread per stream. The seam between the two sides, which may not include each other
// (lib/serve never names lib/recv): the receive side (recv/session/hosted_receive.cpp) makes
// each data stream a HostedStream and gives it to a StreamHost; the host (serve/get/
// push_streams.cpp) reads the socket where the stream says, with the stream's deadline, and hands
// each read's result back to the stream on a thread that may wait for the disk (never the loop's).
#include <linux/time_types.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>

#include "core/io/unique_fd.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

class HostedStream {
public:
    // The next receive: where (at most len bytes), whether to poll first (a low-water mark is
    // set on the socket), and its link timeout (every read has one).
    struct Read {
        unsigned char* buf = nullptr;
        size_t len = 0;
        bool poll_first = false;
        const __kernel_timespec* timeout = nullptr;
    };
    // A disk write the stream leaves to the loop (len 0: none): the loop writes it on its ring
    // while the stream's next receive is in flight, and the buffer stays untouched until wrote().
    struct Write {
        int fd = -1;
        const unsigned char* buf = nullptr;
        unsigned len = 0;
        uint64_t offset = 0;
    };
    virtual ~HostedStream() = default;
    virtual int fd() const = 0;
    // On the loop's thread, before each receive.
    virtual Read next_read() = 0;
    // On the loop's thread: the receive's link timeout fired. True: receive again (a mark's
    // deadline, or a silence the rest of the transfer excuses); throws Error when the stream
    // went silent.
    virtual bool timed_out() = 0;
    // Off the loop (it parses, writes and verifies, and may wait for the disk): the receive
    // brought n bytes (0: the sender closed). True: receive more; false: the stream ended
    // (STREAM_END). Throws Error naming the file or the rule broken.
    virtual bool received(size_t n) = 0;
    // On the loop's thread, after each step: the write that step left (see Write), at most one
    // in flight per stream.
    virtual Write next_write() = 0;
    // Off the loop, before any received() after it: that write ended (res: bytes, or -errno).
    // Throws Error naming the file.
    virtual void wrote(int res) = 0;
    // The receive failed with errno err: the Error that ends the stream.
    virtual Error broke(int err) const = 0;
    // Off the loop, once, last, with nothing of the stream in flight: the stream is over (e null: it ended well). The host destroys
    // the stream after it returns.
    virtual void end(const Error* e) noexcept = 0;
};

class StreamHost {
public:
    virtual ~StreamHost() = default;
    // From any thread: the host owns s from here on. A host that no longer runs ends it at once
    // (end() with a cancelled Error).
    virtual void host(std::unique_ptr<HostedStream> s) = 0;
};

// A Receiver into dir (as Receiver(dir, options)) whose data streams run on host (its data
// path: Stats::data_path "hosted"). The control connection and the handshakes stay on the
// receiver's own two threads. Defined in recv/session/hosted_receive.cpp.
class HostedReceive {
public:
    virtual ~HostedReceive() = default;
    virtual void adopt(UniqueFd fd) = 0; // Receiver::adopt
    virtual Stats wait() = 0;            // Receiver::wait
    virtual void cancel() = 0;           // Receiver::cancel
};
std::unique_ptr<HostedReceive> receive_hosted(const std::filesystem::path& dir, RecvOptions options, StreamHost& host);

} // namespace sluice
