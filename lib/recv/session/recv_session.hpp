#pragma once
// One Receiver's transfer (docs/design.md, "Receiver"). Threads: the one in wait() runs the
// Acceptor and starts the others; the control thread runs the ControlSide; one thread per
// data stream runs the target's receive path, or, given a StreamHost (a push into `sluice
// serve`: core/session/hosted_streams.hpp), each data stream is received on the host's loop
// (recv/paths/hosted_receiver.hpp) and no thread is made for it. The first failure wins (FailureLatch): the
// sender is told (ABORT), every connection is shut down so that blocked threads return, and
// wait() removes what is incomplete and throws it.
#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/io/rtt_deadlines.hpp"
#include "core/session/control_channel.hpp"
#include "core/session/failure_latch.hpp"
#include "core/session/hosted_streams.hpp"
#include "core/session/session_log.hpp"
#include "core/tls/links.hpp"
#include "core/stats/process_usage.hpp"
#include "recv/paths/hosted_receiver.hpp"
#include "recv/session/acceptor.hpp"
#include "recv/session/control_side.hpp"
#include "recv/session/recv_tally.hpp"
#include "recv/session/recv_target.hpp"
#include "recv/session/stream_rejoin.hpp"
#include "recv/store/file_table.hpp"

namespace sluice {

class RecvSession final : Acceptor::Admission {
public:
    // host: where the data streams are received (a directory target only); null: a thread each.
    RecvSession(std::unique_ptr<RecvTarget> target, RecvOptions opts, StreamHost* host = nullptr);
    // Stops the transfer if it runs and joins its threads (wait() must have returned).
    ~RecvSession();

    std::string url() const;
    uint16_t port() const { return acceptor_.port(); }
    void adopt(UniqueFd fd) { acceptor_.adopt(std::move(fd)); } // Receiver::adopt
    Stats wait();
    // From any thread: wait() fails with a cancelled Error.
    void cancel();

private:
    // Acceptor::Admission, on the wait() thread.
    bool accepting() override;
    int max_wait_ms() override { return started_ ? 1000 : -1; }
    wire::AuthStatus admit(const wire::ClientHello& h) override;
    void encrypted(const wire::ClientHello& h, const tls::Psk& psk) override { psk_[h.stream_index] = psk; }
    void join(const wire::ClientHello& h, UniqueFd fd, bool adopted) override;
    void after_round() override {
        check_streams_connected();
        if (auto e = broken_.overdue(opts_.idle_timeout_ms)) fail(*e);
    }

    void start_transfer(const wire::ClientHello& h, UniqueFd control);
    // --mptcp: what an accepted connection became, kept for Stats and said with -v.
    void note_mptcp(const ConnectionMptcp& c);
    void start_data_stream(uint16_t index, UniqueFd fd);
    // hosted_receive.cpp: a data stream given to stream_host_ (its resume and TLS handshake on this
    // thread first), and its end, on whichever thread the host ends it.
    void host_data_stream(unsigned index, int sock, std::optional<StreamReceipt> resumed);
    void hosted_ended(unsigned index, std::unique_ptr<HostedReceiver> rx, const Error* e);
    StreamProgress* progress_of(unsigned index) { return opts_.progress ? &opts_.progress->streams[index - 1] : nullptr; }
    void check_streams_connected();
    void control_main();
    // Encrypted: runs connection index's TLS handshake on tcp; returns the fd to use.
    UniqueFd secure(int tcp, unsigned index);
    void data_main(unsigned index, int sock, std::optional<StreamReceipt> resumed);
    void fail(const Error& e);
    void join_threads();
    Stats stats();

    // idle_timeout_ms is scaled by the control connection's round trip in start_transfer(),
    // before any thread that reads it starts (ControlSide reads it through a reference).
    RecvOptions opts_;
    RttDeadlines deadlines_; // chosen in start_transfer() (core/io/rtt_deadlines.hpp)
    SessionLog log_;
    std::unique_ptr<RecvTarget> target_;
    FileTable files_;
    RecvTally tally_;
    FailureLatch latch_;
    // Encryption (docs/protocol.md, "Encryption"): the PSK of each connection by stream index
    // (0: control), written by the acceptor before the connection's thread starts. Before
    // control_ so the relays end after the session's fds are closed.
    std::array<std::optional<tls::Psk>, wire::kMaxStreams + 1> psk_{};
    tls::Links links_;
    UniqueFd control_tcp_; // encrypted: the control connection under its relay, until the end
    ControlChannel control_;
    ControlSide control_side_;
    RecvContext ctx_;
    Acceptor acceptor_;
    std::string host_; // put into url()
    std::atomic<bool> cancelled_{false};

    // The transfer served, set by the first authenticated control connection. Written and
    // read on the wait() thread only; the control thread reads stream_count_, set before it
    // started.
    bool started_ = false;
    std::array<unsigned char, wire::kTransferIdBytes> transfer_id_{};
    uint16_t stream_count_ = 0;
    std::vector<bool> stream_seen_; // by stream index (from 1)
    bool certificate_verdict_ = false; // the sender waits for CERTIFICATE_ACCEPTED (kFeatureCertificateVerdict)
    bool reconnect_ = false;        // the sender reopens broken data streams (kFeatureStreamReconnect)
    BrokenStreams broken_;
    Clock::time_point t0_;
    std::thread control_thread_;
    std::vector<std::thread> data_threads_;
    StreamHost* stream_host_ = nullptr;
    std::mutex hosted_mu_; // join_threads() waits until no stream is hosted
    std::condition_variable hosted_cv_;
    unsigned hosted_live_ = 0;

    std::mutex data_mu_;         // data_ is filled on the wait() thread and shut down by fail() on any
    std::vector<UniqueFd> data_; // by stream index (from 1)
    std::vector<ConnectionMptcp> mptcp_; // --mptcp: each accepted connection's outcome, on the wait() thread
};

} // namespace sluice
