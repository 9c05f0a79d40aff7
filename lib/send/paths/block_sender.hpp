#pragma once
// A send path: how one data stream turns segments of source files into BLOCK frames on its
// socket. Each stream thread owns one BlockSender (and with it any ring or pipe).
#include <memory>
#include <string>

#include "send/paths/source_reader.hpp"
#include "send/plan/work_queue.hpp"
#include "core/ring/ring.hpp"
#include "sluice/sluice.hpp"

namespace sluice::tls {
class RecordWriter;
}

namespace sluice {

class DirectBlockReader;

class BlockSender {
public:
    virtual ~BlockSender() = default;
    // Sends `seg` as one BLOCK frame; `more` says another frame follows at once (lets TCP
    // coalesce small files). next: the block this stream sends after seg, if known (a path
    // with a direct_reader() reads it ahead). Throws Error naming the file on failure.
    virtual void send(const Segment& seg, bool more, const Segment* next) = 0;
    virtual const char* name() const = 0;
    // Why this stream used a slower way than its path's own, if it did (empty otherwise).
    virtual std::string fallback() const { return {}; }
    // The path's own O_DIRECT reads of cold blocks (tls_records), for the stream's counts;
    // nullptr on the paths that leave them to the stream's ColdBlockSender or read their own.
    virtual const DirectBlockReader* direct_reader() const { return nullptr; }
    SourceReader& reader() { return reader_; }
    // The receiver's silence that fails a send: a blocking send is bounded by SO_SNDTIMEO,
    // a ring's socket request by a link timeout of this length.
    void set_idle_timeout(int ms) {
        idle_ts_.tv_sec = ms / 1000;
        idle_ts_.tv_nsec = (ms % 1000) * 1'000'000LL;
        idle_timeout_ms_ = ms;
    }

protected:
    explicit BlockSender(int sock) : sock_(sock) {}
    // Header and prefix of the frame for seg, with its checksum.
    void frame_prefix(const Segment& seg, unsigned char out[32]);
    // A socket request of a ring that timed out (its link timeout fired, or SO_SNDTIMEO
    // passed in an io-wq worker): the receiver took nothing for the idle timeout.
    [[noreturn]] void receiver_stopped_reading(const std::string& where) const;
    int sock_;
    SourceReader reader_;
    __kernel_timespec idle_ts_{60, 0};
    int idle_timeout_ms_ = 60000;
};

struct SendPathChoice {
    SendPath path;
    std::string fallback; // why a slower path than the one asked for is used; empty if none
};
// Decides the path once per transfer from what the kernel offers. mptcp: the connections are
// asked to be MPTCP sockets, which refuse zero-copy sends (SEND_ZC fails EOPNOTSUPP).
SendPathChoice choose_send_path(SendPath wanted, bool mptcp = false);
// idle_timeout_ms bounds every wait for the receiver to take data (--idle-timeout).
std::unique_ptr<BlockSender> make_block_sender(SendPath path, int sock, int idle_timeout_ms);
// Stats::data_path of the encrypted streams' path.
inline constexpr const char* kRecordsPath = "tls_records";
// An encrypted stream's path (tls_record_sender.cpp): blocks read into w's record slots and
// sealed in place; w outlives it.
std::unique_ptr<BlockSender> make_tls_record_sender(tls::RecordWriter& w, int idle_timeout_ms);

} // namespace sluice
