#pragma once
// What the file sender (sender.cpp) and the pipe sender (pipe_sender.cpp) share
// (docs/design.md): the option checks, connecting, the control reader and the frames both
// handle alike, the end of a data stream, the end of the transfer (TRANSFER_END and the
// receiver's verdict, or an ABORT and the reason) and the Stats fields both fill alike.
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/io/rtt_deadlines.hpp"
#include "core/io/unique_fd.hpp"
#include "core/session/control_channel.hpp"
#include "core/session/failure_latch.hpp"
#include "core/session/session_log.hpp"
#include "core/session/thread_group.hpp"
#include "core/tls/links.hpp"
#include "core/tls/record_writer.hpp"
#include "core/stats/process_usage.hpp"
#include "send/session/rate_limiter.hpp"
#include "send/session/stream_opener.hpp"
#include "send/session/stream_pacer.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

class SendCore {
protected:
    enum class Mode { files, pipe };
    // Throws usage for options out of range (the block size only where files are cut into blocks).
    SendCore(const Endpoint& to, const SendOptions& o, Mode mode);
    // Joins what stop() did not (a last resort: without wake_all(), which is gone by now).
    virtual ~SendCore() { join_threads(); }

    // Ends whatever of the session still runs and joins every thread it started: the stream
    // openers, the data streams, the control reader, the pacer and the relays. Their failures
    // call wake_all() and the derived session's members, so the most-derived destructor calls
    // this first, while the whole object exists; an error thrown anywhere in run() then
    // unwinds into here. If run() did not get to its end, the transfer fails first (ABORT to
    // the receiver, every connection shut down) so that each thread returns at once.
    void stop() noexcept;
    // Runs the session's body: an Error thrown out of it is the transfer's failure, so that the
    // ABORT stop() sends the receiver names it (a first failure stays the one reported).
    template <class Body> Stats fail_on_error(Body&& body) {
        try {
            return body();
        } catch (const Error& e) {
            latch_.fail(e);
            throw;
        }
    }

    // Connects the control connection (throws network or auth) and starts opening the data
    // streams in the background; each stream thread waits for its own (run_stream). all_streams:
    // returns once every stream is open (pipe mode: its pieces go to every stream in turn).
    void connect(const std::string& how, bool all_streams);

    // The control reader thread: runs until FINAL_STATUS, ABORT or a failure, or until the
    // receiver has owed an answer for the idle timeout without a word (timed_out).
    void read_control();
    // What the sender is waiting for from the receiver, and since when, with nothing of its
    // own left to do that the receiver could be waiting for (walking, reading, the producer):
    // only then does the receiver's silence count.
    struct Owed {
        Clock::time_point since;
        std::string what; // "the acknowledgement of manifest page 3"
    };
    virtual std::optional<Owed> owed() = 0;
    virtual void on_manifest_ack(wire::ManifestAck&& ack) = 0;
    virtual void on_all_verified() {}
    // FILES_DONE (the announce window, files only); refused as unexpected by default.
    virtual void on_files_done(const wire::FilesDone&) { unexpected(static_cast<uint8_t>(wire::FrameType::files_done)); }
    virtual void on_block_sums(wire::BlockSums&& s);
    // --dry-run's answers (the file sender); refused as unexpected by default.
    virtual void on_dry_run_items(std::vector<wire::DryRunItem>&&) { unexpected(static_cast<uint8_t>(wire::FrameType::dry_run_items)); }
    virtual void on_dry_run_deleted(wire::DryRunDeleted&&) { unexpected(static_cast<uint8_t>(wire::FrameType::dry_run_deleted)); }
    // Only the file sender resends; by default RESEND is refused as unexpected.
    virtual void on_resend(const wire::ByteRange& r);
    // Wakes every thread of the session that waits for input, work or an ack: it stopped.
    virtual void wake_all() = 0;

    // Runs data stream i: body(progress) sends until there is nothing left and returns the
    // stream's totals (then STREAM_END goes out), or nullopt if the transfer stopped.
    // The stream starts once its connection is open, while later ones may still be opening.
    template <class Body> void run_stream(size_t i, Body&& body) {
        StreamProgress* sp = opts_.progress ? &opts_.progress->streams[i] : nullptr;
        try {
            if (!stream_ready(i)) return; // the transfer stopped first
            if (sp) sp->state = StreamState::moving;
            std::optional<wire::StreamEnd> end = body(sp);
            if (!end) return;
            end_stream(i, *end);
            if (sp) sp->state = StreamState::done;
        } catch (const Error& e) {
            if (sp) sp->state = StreamState::failed;
            latch_.fail(as_stream_silence(i, e));
            // A silent receiver will not read the other streams either: end their sends now
            // instead of each waiting out its own timeout.
            if (e.cause() == ErrorCause::timed_out) {
                shutdown_all(data_);
                shutdown_all(tcp_);
            }
            wake_all();
        }
    }

    // The control reader (read_control) on its own thread, owned by reader_.
    void start_reader() {
        reader_.start([this] { read_control(); });
    }
    // Once every stream thread has returned: ends the transfer and returns once the receiver
    // reported success, or, if it stopped, tells the receiver and throws why.
    void conclude(uint64_t blocks, uint64_t bytes);
    // Tells the receiver why the transfer stops (ABORT with code), waits for the reader and
    // throws the failure.
    [[noreturn]] void abort_peer(uint32_t code);

    [[noreturn]] void unexpected(uint8_t frame_type) const;
    bool cancelled() const { return opts_.cancel && opts_.cancel->load(); }
    void throw_if_cancelled() const {
        if (cancelled()) throw Error(ErrorCode::cancelled, "transfer cancelled");
    }
    // Stats::role of both modes.
    static constexpr const char* kRole = "send";
    // Manifest pages grow 64, 256, 1024 entries and stay there: the receiver checks a page
    // (one fstatat per entry) while the walk fills the next, so what it has left to check
    // after the walk ends is one page. At 4096 the last full page's check ran ~25 ms past the
    // walk of the minor set (perf trace, session 14); an ack per 1,024 entries costs nothing.
    static constexpr size_t kMaxPageEntries = 1024;
    // Fills what both modes report alike (time, streams, CPU and memory, read now) in s.
    Stats closing_stats(Stats s, Clock::time_point t0);

    SendOptions opts_;
    bool sealed_blocks_ = false; // block_size()
    uint32_t path_us_ = 0;       // the control connection's lowest round trip (Connections::path_us)
    Endpoint to_;
    std::string peer_; // host:port, as messages name the receiver
    SessionLog log_;
    RateLimiter limiter_;
    FailureLatch latch_;
    // Before control_ and data_, so it is destroyed after them: a relay sends what they wrote,
    // then ends once they are closed.
    tls::Links links_;
    ControlChannel control_;
    std::vector<UniqueFd> data_; // data_[i] is data stream i + 1 (its number is stable: connect.hpp)
    wire::ClientHello hello_;    // the transfer's, for reopening a data stream
    // wire::kFeature* bits agreed in the handshake, and kFeatureExactMeta if the receiver offered it
    uint16_t features_ = 0;
    std::vector<UniqueFd> tcp_;  // encrypted through relays: the TCP connection under data_[i] (connect.hpp)
    std::vector<std::optional<tls::LinkKeys>> keys_; // encrypted with records: data_[i]'s record keys (connect.hpp)
    // The TCP connections of the data streams (under their relays when encrypted), in order:
    // what TCP_INFO and socket options apply to.
    std::vector<int> tcp_fds() const {
        std::vector<int> fds;
        for (size_t i = 0; i < data_.size(); ++i) fds.push_back(tcp_fd(i));
        return fds;
    }
    // Paces the data streams together until closing_stats() (stream_pacer.hpp). After tcp_
    // and data_: stopped before they close.
    // settled: --streams auto's settled count (StreamGovernor::settled_flag; empty: a fixed count).
    void start_pacer(std::function<unsigned()> settled = {});
    std::optional<StreamPacer> pacer_;
    std::string pacing_choice_; // Stats::pacing_choice
    std::string auto_fixed_;    // Stats::streams_choice where --streams auto met a LAN (connect.hpp)
    bool push_ = false;         // the receiver is a sluice serve's, for a push (push_request.hpp)
    // Encrypted with records (the file sender): writers_[i] seals what data stream i + 1
    // sends (its send paths and STREAM_END), made by the stream's thread once it is open;
    // empty otherwise (or a null where kTLS took over).
    std::vector<std::unique_ptr<tls::RecordWriter>> writers_;
    tls::RecordWriter* writer(size_t i) const { return writers_.empty() ? nullptr : writers_[i].get(); }
    // After the stream threads are joined: whether any stream sealed its own records.
    // The block size planned with: --block-size, or kSealedBlockBytes (connect()).
    uint64_t block_size() const { return sealed_blocks_ ? tls::kSealedBlockBytes : opts_.block_size; }
    bool sealed_records() const {
        for (const auto& w : writers_)
            if (w) return true;
        return false;
    }
    // The transfer stopped: the TCP connections of encrypted streams are shut down (under a
    // relay or under a writer), so that a send blocked on a receiver that stopped reading
    // returns (the receiver's ABORT may come through a proxy that keeps the stream open).
    void shut_encrypted_streams() {
        shutdown_all(tcp_);
        if (!writers_.empty()) shutdown_all(data_);
    }

    // Opens the data streams in the background. After every fd and object its threads use
    // (data_, tcp_, keys_, links_): destroyed, so joined, before them.
    StreamOpener opener_;
    // One thread per data stream (run_stream), started by the derived session; joined by it
    // once the work is done, or by stop().
    ThreadGroup streams_;

private:
    void join_threads() noexcept;
    ThreadGroup reader_; // the control reader: joined in conclude() or abort_peer(), or by stop()
    bool ended_ = false; // the reader is joined: the transfer ended (or its ABORT went out)
    // Waits until data stream i + 1 is open (throws why its open failed) and makes its record
    // writer; false if the transfer stopped first.
    bool stream_ready(size_t i);
    // The TCP connection of data stream i + 1 (under its relay when encrypted).
    int tcp_fd(size_t i) const { return tcp_.empty() ? data_[i].get() : tcp_[i].get(); }
    void end_stream(size_t i, const wire::StreamEnd& end);
    // --mptcp: each connection's outcome into s.mptcp_connections and -v (core/io/mptcp.hpp).
    void add_mptcp(Stats& s);
    ConnectionMptcp control_mptcp_; // read when the control connection was made
    std::string control_cc_;        // its congestion control, read before encryption (connect.hpp)
    RttDeadlines deadlines_;        // chosen when the control connection was made (connect())
    // Waits until a frame starts to arrive on the control connection; throws timed_out once
    // the receiver has owed an answer for the idle timeout.
    void await_frame();
    // A data stream's send that timed out, as the receiver's silence on that stream.
    Error as_stream_silence(size_t i, const Error& e) const;

    Mode mode_;
    std::optional<wire::FinalStatus> final_; // written by the reader, read once it is joined
    // TRANSFER_END is out: a control connection that breaks now is judged by the verdict.
    std::atomic<bool> finished_{false};
    std::atomic<Clock::rep> finished_at_{0}; // when TRANSFER_END went out
    Clock::time_point last_frame_;           // the reader's: when the receiver last sent a frame
    // The reader's: the data streams' bytes the receiver's TCP acknowledged, and when that last
    // grew (await_frame(): a receiver draining the socket buffers is not silent).
    uint64_t data_acked_ = 0;
    Clock::time_point data_taken_;
    void note_data_taken();
};

} // namespace sluice
