#include "send/session/send_core.hpp"

#include "core/io/mptcp.hpp"
#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/session/session_stats.hpp"
#include "core/wire/codec.hpp"
#include "core/tls/policy.hpp"
#include "send/session/connect.hpp"

namespace sluice {

SendCore::SendCore(const Endpoint& to, const SendOptions& o, Mode mode)
    : opts_(o), to_(to), peer_(to.host + ":" + std::to_string(to.port)), log_(o.log, o.verbose), limiter_(o.rate_limit),
      mode_(mode) {
    if (opts_.streams < 1 || opts_.streams > wire::kMaxStreams)
        throw Error(ErrorCode::usage,
                    "--streams " + std::to_string(opts_.streams) + ": must be 1 to " + std::to_string(wire::kMaxStreams));
    if (opts_.dry_run && opts_.checksum)
        throw Error(ErrorCode::usage, "--dry-run with --checksum: not built (the receiver would read every file it has)");
    if (opts_.dry_run && mode_ == Mode::pipe) throw Error(ErrorCode::usage, "--dry-run: not for a byte stream ('-')");
    if (mode_ == Mode::files &&
        (opts_.block_size < 64 * 1024 || opts_.block_size > wire::kMaxBlockData || opts_.block_size % 4096))
        throw Error(ErrorCode::usage,
                    "--block-size " + std::to_string(opts_.block_size) + ": must be a multiple of 4 KiB from 64 KiB to 64 MiB");
    if (to_.token.empty()) throw Error(ErrorCode::usage, "no token: use the receiver's sluice:// line or --token");
    check_congestion_control(opts_.congestion_control); // before connecting: a typo costs no connection
    opts_.encrypt = tls::with_certificates(opts_.encrypt, opts_.certificates);
    if (opts_.certificates.any()) // the files are read and checked before any connection
        links_.use_certificates(std::make_shared<const tls::CertContext>(opts_.certificates, tls::Side::client), to_.host,
                                opts_.idle_timeout_ms);
    if (mode_ == Mode::pipe) {
        // Pipe pieces go to every stream in turn: holding streams back would stall the order,
        // and a piece lost with a broken stream cannot be sent again out of order.
        opts_.retry_for_ms = 0;
        opts_.announce_window = 0; // one entry
        if (opts_.streams_auto) {
            opts_.streams_auto = false;
            opts_.streams = kDefaultStreams;
            log_.verbose_line("--streams auto: pipe mode sends over a fixed " + std::to_string(kDefaultStreams) + " streams");
        }
    }
}

void SendCore::connect(const std::string& how, bool all_streams) {
    // Streams already opening call back into this object (wake_all(), virtual) when they fail:
    // if this throws, the session's destructor stops and joins them (stop()) before the
    // object goes.
    Connections c = connect_transfer(
        to_, opts_, links_,
        [this](const Error& e) {
            latch_.fail(e);
            wake_all();
        },
        mode_ == Mode::files, DataStreams{.data = data_, .tcp = tcp_, .keys = keys_}, opener_,
        [this] { return latch_.stopped() || cancelled(); });
    control_.attach(std::move(c.control));
    if (!c.auto_fixed.empty()) {
        opts_.streams_auto = false;
        opts_.streams = c.streams;
        auto_fixed_ = c.auto_fixed;
        log_.verbose_line("streams " + auto_fixed_);
    }
    push_ = c.push;
    if (c.push)
        log_.verbose_line("pushing into the sluice serve at " + peer_ + ": it took the push request; every connection "
                          "attaches through its port (GET_ATTACH) to a receiver it runs for this push");
    hello_ = c.hello;
    features_ = static_cast<uint16_t>(c.features | (c.offered & wire::kFeatureExactMeta));
    control_mptcp_ = c.control_mptcp;
    control_cc_ = c.congestion_control;
    // Every later wait (the control reader, each stream's sends, reopening a stream) reads these.
    deadlines_ = c.deadlines;
    path_us_ = c.path_us;
    opts_.idle_timeout_ms = deadlines_.idle_ms;
    limiter_.set_idle_timeout(deadlines_.idle_ms); // its waits stay short beside the receiver's
    opts_.connect_timeout_ms = deadlines_.connect_ms;
    log_.verbose_line(deadlines_line(deadlines_));
    if (opts_.mptcp) log_.verbose_line(mptcp_line(control_mptcp_));
    writers_.resize(keys_.size()); // made by each stream's thread once it is open (stream_ready)
    if (c.encrypted && opts_.retry_for_ms > 0) {
        opts_.retry_for_ms = 0; // connect.cpp: a reopened stream would start over in clear
        log_.verbose_line("stream reconnect is off: not built for encrypted transfers yet (a broken stream fails the transfer)");
    }
    log_.verbose_line("connected to " + peer_ + how + "; opening " + std::to_string(data_.size()) + " data streams, " +
                      std::to_string(kParallelOpens) + " at a time, each sending once it is open");
    log_.verbose_line(links_.path().empty() ? "encryption: off" : "encryption: " + links_.path() + " (" + links_.why() + ")");
    if (!links_.path().empty()) log_.verbose_line(links_.records_line());
    if (links_.certificates() && !(features_ & wire::kFeatureCertificateVerdict))
        log_.verbose_line("warning: the receiver predates CERTIFICATE_ACCEPTED: data streams open without its verdict on "
                          "this side's certificate, so a refusal may show as a data stream's failure");
    // Sealed in user space, a block is read, hashed and sealed in the stream's record slots
    // before its prefix (which carries the checksum) and then all of it is sent: at the default
    // 8 MiB the send copy found the block out of the cache (perf, 2 GiB over loopback: a
    // quarter of the machine's CPU, 3.7x WDT's send copy). A --block-size chosen is kept.
    if (mode_ == Mode::files && links_.path() == tls::kPathUser && opts_.block_size == kDefaultBlockSize) {
        sealed_blocks_ = true;
        log_.verbose_line("block size: " + std::to_string(tls::kSealedBlockBytes >> 20) +
                          " MiB (encrypted in user space: a block stays in the cache from its read to its send)");
    }
    if (all_streams) {
        if (!opener_.await_all([this] { return latch_.stopped() || cancelled(); })) {
            throw_if_cancelled();
            latch_.rethrow();
        }
        log_.verbose_line(opener_.timeline());
    }
}

bool SendCore::stream_ready(size_t i) {
    if (!opener_.await(static_cast<unsigned>(i + 1), [this] { return latch_.stopped() || cancelled(); })) return false;
    if (i < keys_.size() && keys_[i])
        writers_[i] = std::make_unique<tls::RecordWriter>(data_[i].get(), keys_[i]->tx,
                                                          tls::link_name(static_cast<unsigned>(i + 1)),
                                                          std::min<uint64_t>(block_size(), tls::kWriterBytes));
    if (i == 0) {
        log_.verbose_line("data stream 1 open, congestion control " + congestion_control_of(tcp_fd(0)));
        if (opts_.mptcp) log_.verbose_line(mptcp_line(mptcp_of(tcp_fd(0), 1, true, false)));
        if (!links_.path().empty()) log_.verbose_line("encryption of the data streams: " + tls::streams_text(links_.streams()));
    }
    return true;
}

void SendCore::read_control() {
    try {
        last_frame_ = Clock::now();
        for (;;) {
            await_frame();
            // Once a frame has begun, the rest must follow within the idle timeout (SO_RCVTIMEO).
            Frame f = control_.read("control connection");
            last_frame_ = Clock::now();
            switch (f.type()) {
            case wire::FrameType::manifest_ack: on_manifest_ack(wire::decode_manifest_ack(f.payload)); break;
            case wire::FrameType::resend: on_resend(wire::decode_resend(f.payload)); break;
            case wire::FrameType::all_verified: on_all_verified(); break;
            case wire::FrameType::block_sums: on_block_sums(wire::decode_block_sums(f.payload)); break;
            case wire::FrameType::files_done: on_files_done(wire::decode_files_done(f.payload)); break;
            case wire::FrameType::dry_run_items: on_dry_run_items(wire::decode_dry_run_items(f.payload)); break;
            case wire::FrameType::dry_run_deleted: on_dry_run_deleted(wire::decode_dry_run_deleted(f.payload)); break;
            case wire::FrameType::working: break; // the receiver is alive and busy for us: last_frame_ moved
            case wire::FrameType::final_status: final_ = wire::decode_final_status(f.payload); return;
            case wire::FrameType::abort:
                latch_.peer_abort(wire::decode_abort(f.payload).message);
                // Encrypted: a relay, or a stream sealing its own records, may be blocked sending
                // to a receiver that has stopped reading; it returns once the connection is shut.
                shut_encrypted_streams();
                wake_all();
                return;
            default: unexpected(f.header.type);
            }
        }
    } catch (const Error& e) {
        // After TRANSFER_END a connection that breaks is judged by the verdict, but silence
        // past the deadline is the failure itself, and so is a frame the receiver got wrong
        // (--dry-run's deletions arrive then).
        if (!latch_.stopped() && (!finished_ || e.cause() == ErrorCause::timed_out || e.code() == ErrorCode::protocol))
            latch_.fail(e);
        if (e.cause() == ErrorCause::timed_out) shutdown_all(data_); // streams blocked on the silent receiver return
        // Encrypted: a relay blocked sending to a receiver that is gone returns, and with it
        // the stream writing into the relay.
        if (latch_.stopped()) shut_encrypted_streams();
        wake_all();
    }
}

void SendCore::await_frame() {
    const auto idle = std::chrono::milliseconds(opts_.idle_timeout_ms);
    for (;;) {
        // What is owed can change while we wait (a page goes out, the last stream goes
        // idle): wait no longer than a quarter of the idle timeout, then look again.
        auto wait = idle;
        std::optional<Owed> o = owed();
        if (!o && finished_) o = Owed{Clock::time_point(Clock::duration(finished_at_.load())), "the final status"};
        if (o) {
            // The receiver taking what the data streams' socket buffers still hold is not its
            // silence: on a slow link they drain for longer than the idle timeout after the
            // last send, while ALL_VERIFIED waits for the last byte. Once nothing more is
            // acknowledged (a stopped receiver's buffer fills), the clock runs again.
            note_data_taken();
            const auto deadline = std::max({o->since, last_frame_, data_taken_}) + idle;
            const auto now = Clock::now();
            if (now >= deadline)
                throw Error(ErrorCode::network,
                            "receiver " + peer_ + " went silent for " + timeout_text(opts_.idle_timeout_ms) +
                                " on the control connection while the sender waited for " + o->what + " (idle timeout)",
                            ErrorCause::timed_out);
            wait = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
        }
        if (wait_readable_for(control_.fd(), static_cast<int>(std::min(wait, std::max(idle / 4, std::chrono::milliseconds(1))).count())))
            return;
    }
}

void SendCore::note_data_taken() {
    uint64_t acked = 0;
    for (int fd : tcp_fds()) acked += bytes_acked(fd);
    if (acked > data_acked_) {
        data_acked_ = acked;
        data_taken_ = Clock::now();
    }
}

Error SendCore::as_stream_silence(size_t i, const Error& e) const {
    if (e.cause() != ErrorCause::timed_out) return e;
    return Error(ErrorCode::network,
                 "receiver " + peer_ + " stopped reading data stream " + std::to_string(i + 1) + " for " +
                     timeout_text(opts_.idle_timeout_ms) + " (idle timeout): " + e.what(),
                 ErrorCause::timed_out);
}

void SendCore::on_resend(const wire::ByteRange&) { unexpected(static_cast<uint8_t>(wire::FrameType::resend)); }

void SendCore::on_block_sums(wire::BlockSums&&) { unexpected(static_cast<uint8_t>(wire::FrameType::block_sums)); }

void SendCore::unexpected(uint8_t type) const {
    throw Error(ErrorCode::protocol, std::string("receiver sent an unexpected ") + wire::frame_type_name(type) +
                                         (mode_ == Mode::pipe ? " frame in pipe mode" : " frame"));
}

void SendCore::end_stream(size_t i, const wire::StreamEnd& end) {
    wire::Bytes out;
    wire::encode_stream_end(out, end);
    if (tls::RecordWriter* w = writer(i)) {
        w->write(out.data(), out.size());
        w->flush();
        return;
    }
    send_all(data_[i].get(), out, "ending a data stream");
}

void SendCore::conclude(uint64_t blocks, uint64_t bytes) {
    if (latch_.stopped()) {
        // The receiver's ABORT with its reason is half a round trip away at least: a second,
        // or four round trips on a link where that is longer (capped: it only improves a message).
        const auto rtts = std::chrono::milliseconds(std::min<uint64_t>(uint64_t(deadlines_.rtt_us) * 4 / 1000, 10'000));
        latch_.await_peer_reason(std::max(std::chrono::milliseconds(1000), rtts));
        abort_peer(wire::kAbortFailed);
    }
    // The verdict must come back within the idle timeout of TRANSFER_END (the reader's deadline).
    finished_at_ = Clock::now().time_since_epoch().count();
    finished_ = true;
    try {
        wire::Bytes out;
        wire::encode_transfer_end(
            out, wire::TransferEnd{.data_streams = static_cast<uint32_t>(data_.size()), .blocks = blocks, .bytes = bytes});
        control_.write(out, "ending the transfer");
    } catch (const Error& e) {
        latch_.fail(e);
        // No verdict will come for a TRANSFER_END that did not go out: the reader must not wait for one.
        control_.abort(wire::kAbortFailed, e.what());
    }
    reader_.join();
    ended_ = true;
    if (latch_.stopped()) latch_.rethrow();
    if (!final_)
        throw Error(ErrorCode::network, "receiver " + peer_ + " closed the connection without a final status",
                    ErrorCause::peer_closed);
    if (final_->status != 0)
        throw Error(ErrorCode::destination, "receiver " + peer_ + " reported failure: " + final_->message,
                    ErrorCause::peer_aborted);
    // Lines after the first: what a receiver that does not fully trust this sender did not keep
    // (docs/protocol.md, FINAL_STATUS), one per kind. The message was escaped as it was decoded
    // (a line feed is "\x0a" by then); the receiver escaped each line before joining them.
    constexpr std::string_view kLineFeed = "\\x0a";
    std::string_view rest(final_->message);
    for (size_t nl = rest.find(kLineFeed); nl != std::string_view::npos; nl = rest.find(kLineFeed)) {
        rest.remove_prefix(nl + kLineFeed.size());
        log_.line("receiver " + peer_ + ": " + std::string(rest.substr(0, rest.find(kLineFeed))));
    }
}

void SendCore::abort_peer(uint32_t code) {
    control_.abort(code, latch_.message());
    shutdown_all(data_);
    shutdown_all(tcp_);
    reader_.join();
    ended_ = true;
    latch_.rethrow();
}

void SendCore::stop() noexcept {
    if (!ended_) {
        // run() did not get to its end: something thrown is unwinding it. The transfer fails
        // (a first failure stays the one reported) and the receiver is told.
        latch_.fail(Error(ErrorCode::internal, "the sender stopped before the end of the transfer"));
        control_.abort(wire::kAbortFailed, latch_.message()); // the reader returns
    }
    if (latch_.stopped()) {
        links_.stop();      // data streams waiting for the control connection's session
        shutdown_all(data_); // opens and sends in flight return
        shutdown_all(tcp_);
        wake_all(); // every wait of the derived session
    }
    join_threads();
}

void SendCore::join_threads() noexcept {
    opener_.join();
    streams_.join();
    reader_.join();
    if (pacer_) pacer_->join();
    // The relays call back (the failure callback of connect()) until they end.
    links_.close();
}

void SendCore::start_pacer(std::function<unsigned()> settled) {
    // The control connection's (connect.hpp), not a data stream's: one may still be opening
    // (stream_opener.hpp) on a placeholder socket with the system's.
    pacing_choice_ = pacing_choice(opts_.pacing, data_.empty() ? std::string() : control_cc_, opts_.streams_auto);
    log_.verbose_line("pacing: " + pacing_choice_);
    if (pacing_choice_.starts_with("off")) return;
    pacer_.emplace(tcp_fds(), [this](const std::string& l) { log_.verbose_line(l); },
                   opts_.streams_auto ? std::move(settled) : std::function<unsigned()>());
    pacer_->start();
}

void SendCore::add_mptcp(Stats& s) {
    // Read at the end, on the connections the streams ended on (a reopened stream's new one):
    // the subflows are those that survived the transfer.
    control_mptcp_.subflows = control_mptcp_.mptcp ? mptcp_subflows(control_.fd()) : 0;
    s.mptcp_connections.push_back(control_mptcp_);
    for (size_t i = 0; i < data_.size(); ++i) {
        s.mptcp_connections.push_back(mptcp_of(tcp_fd(i), static_cast<unsigned>(i + 1), true, false));
        if (!s.mptcp_connections.back().mptcp) log_.verbose_line(mptcp_line(s.mptcp_connections.back()));
    }
    s.mptcp = mptcp_summary(s.mptcp_connections);
    unsigned on = 0;
    for (const ConnectionMptcp& c : s.mptcp_connections) on += c.mptcp;
    log_.verbose_line("mptcp: " + std::to_string(on) + " of " + std::to_string(s.mptcp_connections.size()) +
                      " connections run MPTCP (" + s.mptcp + ")");
}

Stats SendCore::closing_stats(Stats s, Clock::time_point t0) {
    s.seconds = seconds_since(t0);
    opener_.join(); // every stream ended, so every open did
    if (mode_ == Mode::files) log_.verbose_line(opener_.timeline()); // pipe mode said it once all were open
    if (pacer_) {
        pacer_->join();
        s.pacing = pacer_->summary();
    }
    s.pacing_choice = pacing_choice_;
    s.streams = static_cast<unsigned>(data_.size());
    if (s.streams_used == 0) s.streams_used = s.streams; // fixed counts: every stream took work
    // The sockets are still open: what TCP_INFO says now covers the whole transfer.
    std::vector<int> fds;
    for (size_t i = 0; i < data_.size(); ++i) {
        fds.push_back(tcp_fd(i));
        s.tcp_streams.push_back(stream_tcp(tcp_fd(i), static_cast<unsigned>(i + 1)));
    }
    if (!data_.empty()) s.congestion_control = congestion_control_of(tcp_fd(0));
    links_.fill(s);
    if (!links_.path().empty()) log_.verbose_line(links_.handshakes_line());
    if (opts_.mptcp) add_mptcp(s);
    s.control_rtt_us = deadlines_.rtt_us;
    s.idle_timeout_ms = deadlines_.idle_ms;
    s.connect_timeout_ms = deadlines_.connect_ms;
    s.window_limits = send_window_limits(fds, s.tcp_streams, &s.window_limits_unjudged);
    for (const std::string& w : s.window_limits) log_.verbose_line(w);
    if (!s.window_limits_unjudged.empty()) log_.verbose_line(s.window_limits_unjudged);
    add_process_usage(s);
    return s;
}

} // namespace sluice
