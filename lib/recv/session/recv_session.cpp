#include "recv/session/recv_session.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>

#include "core/io/mptcp.hpp"
#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/ring/ring.hpp"
#include "core/session/session_stats.hpp"
#include "core/tls/policy.hpp"
#include "core/wire/codec.hpp"
#include "recv/session/finishing.hpp"

namespace sluice {

namespace {

std::string advertised_host(const RecvOptions& o) {
    if (!o.advertise_host.empty()) return o.advertise_host;
    if (!o.bind_address.empty() && o.bind_address != "0.0.0.0" && o.bind_address != "::") return o.bind_address;
    return primary_address();
}

// A reader of our output fd that goes away must fail the transfer, not kill the process:
// SIGPIPE stays pending on this thread and dies with it.
void block_sigpipe_on_this_thread() {
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
}

// Certificates turn encryption on (tls::with_certificates), before the acceptor reads it.
RecvOptions certified(RecvOptions o) {
    o.encrypt = tls::with_certificates(o.encrypt, o.certificates);
    return o;
}

} // namespace

RecvSession::RecvSession(std::unique_ptr<RecvTarget> target, RecvOptions opts, StreamHost* host)
    : opts_(certified(std::move(opts))), log_(opts_.log, opts_.verbose), target_(std::move(target)),
      files_(opts_.max_files, opts_.max_manifest_bytes), control_side_(opts_, *target_, files_, tally_, control_, log_, latch_),
      ctx_{.files = files_,
           .tree = target_->tree(),
           .sync = opts_.sync,
           .verify = opts_.verify,
           .idle_timeout_ms = opts_.idle_timeout_ms,
           .progress = opts_.progress,
           .bytes_received = tally_.bytes_received,
           .files_completed = tally_.files_completed,
           .bytes_verified_from_disk = tally_.bytes_verified_from_disk,
           .block_failed = [this](RecvFile& f, uint64_t off, uint64_t len) { control_side_.block_failed(f, off, len); },
           .file_completed = [this] { control_side_.file_completed(); },
           .still_working = [this] { control_side_.still_working(); },
           .pulse = &control_side_.pulse(),
           .bytes_written_direct = &tally_.bytes_written_direct,
           .sums_cache = &control_side_.sums_cache(),
           .marks = &tally_.marks},
      acceptor_(opts_, log_), host_(advertised_host(opts_)), stream_host_(host) {
    if (opts_.certificates.any()) {
        auto certs = std::make_shared<const tls::CertContext>(opts_.certificates, tls::Side::server);
        log_.verbose_line("certificate mode: this receiver's key is " + certs->own_spki() + " (the sender's --pin)");
        links_.use_certificates(std::move(certs), "", opts_.idle_timeout_ms);
    }
}

RecvSession::~RecvSession() {
    cancelled_ = true;
    fail(Error(ErrorCode::cancelled, "receiver destroyed"));
    join_threads();
}

std::string RecvSession::url() const { return format_url({host_, acceptor_.port(), acceptor_.token()}); }

void RecvSession::cancel() {
    cancelled_ = true;
    acceptor_.wake();
}

// ---------------- admission (wait() thread) ----------------

bool RecvSession::accepting() {
    if (latch_.ended()) return false;
    if (cancelled_) {
        fail(Error(ErrorCode::cancelled, "receive cancelled"));
        return false;
    }
    return true;
}

wire::AuthStatus RecvSession::admit(const wire::ClientHello& h) {
    if (h.role == wire::Role::control) {
        if (started_) return wire::AuthStatus::other_transfer;
        if (opts_.max_streams && h.stream_count > opts_.max_streams) {
            log_.verbose_line("a control connection asking for " + std::to_string(h.stream_count) + " data streams refused (at most " +
                              std::to_string(opts_.max_streams) + ")");
            return wire::AuthStatus::bad_stream;
        }
        return wire::AuthStatus::ok;
    }
    if (!started_ || h.transfer_id != transfer_id_) return wire::AuthStatus::other_transfer;
    if (h.stream_count != stream_count_ || (stream_seen_[h.stream_index] && !broken_.awaited(h.stream_index)))
        return wire::AuthStatus::bad_stream;
    return wire::AuthStatus::ok;
}

void RecvSession::join(const wire::ClientHello& h, UniqueFd fd, bool adopted) {
    if (opts_.mptcp) note_mptcp(mptcp_of(fd.get(), h.role == wire::Role::control ? 0 : h.stream_index, true, !adopted));
    if (h.role == wire::Role::control) {
        start_transfer(h, std::move(fd));
    } else {
        stream_seen_[h.stream_index] = true;
        start_data_stream(h.stream_index, std::move(fd));
    }
}

void RecvSession::start_transfer(const wire::ClientHello& h, UniqueFd control) {
    started_ = true;
    t0_ = Clock::now();
    transfer_id_ = h.transfer_id;
    stream_count_ = h.stream_count;
    reconnect_ = (h.features & wire::kFeatureStreamReconnect) != 0;
    certificate_verdict_ = (h.features & wire::kFeatureCertificateVerdict) != 0;
    control_side_.set_sender_features(h.features);
    if (h.features & wire::kFeatureAnnounceWindow) {
        control_side_.use_announce_window();
        // Complete entries are given back where every stream names what it touches; TREE_OPTIONS
        // (--delete) turns it off again (ControlSide); tree metadata is applied as a slab is released.
        files_.allow_release(target_->streams_hold_entries());
        log_.verbose_line(std::string("announce window: on; complete entries ") +
                          (files_.releasing() ? "released" : "kept (the receive path " + target_->data_path() + " keeps pointers to them)"));
    }
    stream_seen_.assign(stream_count_ + 1u, false);
    {
        std::lock_guard lk(data_mu_);
        data_.resize(stream_count_ + 1u);
    }
    if (opts_.progress) opts_.progress->stream_count = stream_count_;
    // The connection's TCP handshake and hello measured the link: our deadlines scale with
    // it from here on (the data threads and the control thread start after this).
    deadlines_ = rtt_deadlines(0, opts_.idle_timeout_ms, smoothed_rtt_us(control.get()));
    opts_.idle_timeout_ms = ctx_.idle_timeout_ms = deadlines_.idle_ms;
    ctx_.sender = peer_address(control.get()); // before any data stream's thread reads it
    acceptor_.set_idle_timeout(deadlines_.idle_ms);
    log_.verbose_line(deadlines_line(deadlines_));
    // Until the manifest has ended the sender must keep talking (ControlSide lifts this).
    set_io_timeout(control.get(), opts_.idle_timeout_ms);
    set_nodelay(control.get());
    if (psk_[0])
        control_tcp_ = std::move(control); // attached by the control thread after its TLS handshake
    else
        control_.attach(std::move(control));
    log_.verbose_line("transfer started: " + std::to_string(stream_count_) + " data streams");
    control_thread_ = std::thread([this] { control_main(); });
}

void RecvSession::start_data_stream(uint16_t index, UniqueFd fd) {
    int sock = fd.get();
    // A stream seen before is one the sender reopened after a break: its old connection is done.
    std::optional<StreamReceipt> resumed;
    if (broken_.awaited(index)) resumed = broken_.rejoined(index);
    {
        std::lock_guard lk(data_mu_);
        data_[index] = std::move(fd);
        // fail() shut the others down before this one was here: its thread must not wait.
        if (latch_.stopped()) shutdown_all(std::span(data_).subspan(index, 1));
    }
    if (stream_host_) return host_data_stream(index, sock, resumed);
    data_threads_.emplace_back([this, index, sock, resumed] { data_main(index, sock, resumed); });
}

// A transfer whose data streams do not all arrive within the idle timeout cannot finish.
void RecvSession::check_streams_connected() {
    if (!started_) return;
    auto connected = static_cast<unsigned>(std::count(stream_seen_.begin(), stream_seen_.end(), true));
    if (connected == stream_count_) return;
    if (seconds_since(t0_) * 1000 < opts_.idle_timeout_ms) return;
    fail(Error(ErrorCode::network,
               "only " + std::to_string(connected) + " of " + std::to_string(stream_count_) +
                   " data streams connected within the idle timeout",
               ErrorCause::timed_out));
}

// ---------------- the other threads ----------------

UniqueFd RecvSession::secure(int tcp, unsigned index) {
    UniqueFd fd = links_.secure(tcp, tls::Side::server, *psk_[index], "the sender", index, [this](const Error& e) { fail(e); });
    set_io_timeout(fd.get(), opts_.idle_timeout_ms);
    return fd;
}

void RecvSession::control_main() {
    try {
        if (psk_[0]) {
            control_.attach(secure(control_tcp_.get(), 0));
            log_.verbose_line("encryption: " + links_.path() + " (" + links_.why() + ")");
            log_.verbose_line(links_.records_line());
            // TLS 1.3 ends the sender's handshake before ours has judged its certificate: the
            // sender opens its data streams only after this verdict (send/session/connect.cpp).
            if (links_.certificates() && certificate_verdict_) {
                wire::Bytes out;
                wire::encode_certificate_accepted(out);
                control_.write(out, "accepting the sender's certificate handshake");
            }
        }
        control_side_.serve(stream_count_);
        acceptor_.wake(); // the verdict is out: wait() can return
    } catch (const Error& e) {
        fail(control_side_.as_sender_fault(e));
    }
}

void RecvSession::data_main(unsigned index, int sock, std::optional<StreamReceipt> resumed) {
    StreamProgress* sp = progress_of(index);
    UniqueFd plain; // encrypted: the relay's end, which rx reads (so it outlives rx)
    std::unique_ptr<StreamReceiver> rx;
    try {
        if (sp) sp->state = StreamState::moving;
        block_sigpipe_on_this_thread();
        if (resumed) send_stream_resume(sock, index, *resumed, log_);
        std::optional<tls::LinkKeys> keys; // encrypted, and the path opens its own records (no relay)
        if (psk_[index] && target_->opens_records()) {
            keys = links_.open_records(sock, tls::Side::server, *psk_[index], "the sender", index);
            if (index == 1) log_.verbose_line("encryption: " + links_.path() + "; data streams: " + tls::streams_text(links_.streams()));
        } else if (psk_[index]) {
            plain = secure(sock, index);
        }
        rx = target_->open_stream(plain ? plain.get() : sock, index, ctx_, keys ? &*keys : nullptr);
        StreamReceipt r = rx->run();
        if (sp) {
            sp->bytes = r.bytes;
            sp->state = StreamState::done;
        }
        if (std::string fb = rx->fallback(); tally_.note_fallback(fb)) log_.verbose_line("slower path: " + fb);
        rx.reset(); // its counts (tally_.marks) are in before the stream counts as ended
        tally_.stream_ended(r);
    } catch (const Error& e) {
        if (reconnect_ && rx && !latch_.stopped() && BrokenStreams::heals(e)) {
            if (std::optional<StreamReceipt> whole = rx->settle_after_break()) {
                rx.reset(); // done with the old connection before a new one can take its place
                tally_.stream_broke(*whole);
                broken_.broke(index, *whole, e.what());
                log_.verbose_line("data stream " + std::to_string(index) + " broke (" + e.what() + ") after " +
                                  std::to_string(whole->blocks) + " whole blocks: waiting for the sender to reopen it");
                if (sp) sp->state = StreamState::waiting;
                return;
            }
        }
        if (sp) sp->state = StreamState::failed;
        fail(e);
    }
}

// First error wins; the rest are its consequences.
void RecvSession::fail(const Error& e) {
    if (!latch_.fail(e)) return;
    tally_.wake();
    target_->stop();
    control_.abort(wire::kAbortFailed, e.what());
    if (control_tcp_) ::shutdown(control_tcp_.get(), SHUT_RDWR); // a TLS handshake in progress returns
    links_.stop(); // and a data stream's waiting for it
    {
        std::lock_guard lk(data_mu_);
        shutdown_all(data_);
    }
    acceptor_.wake();
}

void RecvSession::join_threads() {
    if (control_thread_.joinable()) control_thread_.join();
    for (auto& t : data_threads_) t.join();
    data_threads_.clear();
    std::unique_lock lk(hosted_mu_);
    hosted_cv_.wait(lk, [this] { return hosted_live_ == 0; }); // the host ends each (fail() shut their sockets)
}

// ---------------- the end ----------------

Stats RecvSession::wait() {
    try {
        acceptor_.run(*this);
    } catch (const Error& e) {
        fail(e);
    }
    join_threads();
    if (auto err = latch_.error()) {
        // A failed destination (disk full, permissions) frees its space; otherwise what was
        // journaled stays for a resume.
        if (target_->writes_files()) remove_partial_files(files_, target_->tree(), err->code() != ErrorCode::destination);
        throw *err;
    }
    return stats();
}

void RecvSession::note_mptcp(const ConnectionMptcp& c) {
    // A reopened data stream's new connection replaces its old one.
    auto old = std::find_if(mptcp_.begin(), mptcp_.end(), [&](const ConnectionMptcp& m) { return m.stream == c.stream; });
    if (old != mptcp_.end())
        *old = c;
    else
        mptcp_.push_back(c);
    log_.verbose_line(mptcp_line(c));
}

Stats RecvSession::stats() {
    const ControlSide::Counts& c = control_side_.counts();
    Stats s{
        .role = "recv",
        .bytes = control_side_.has_pipe() ? target_->pipe_output()->delivered() : c.bytes,
        .bytes_sent = tally_.bytes_received.load(),
        .bytes_skipped = c.bytes_skipped,
        .bytes_holes = c.bytes_holes,
        .bytes_reused = c.bytes_reused,
        .files_sums_cached = control_side_.sums_cached(),
        .files_sums_hashed = control_side_.sums_hashed(),
        .files_sums_stored = c.sums_stored,
        .files = c.files,
        .dirs = c.dirs,
        .symlinks = c.links,
        .blocks = tally_.blocks(),
        .files_held_peak = files_.held_peak(),
        .checksum_failures = control_side_.checksum_failures(),
        .bytes_verified_from_disk = tally_.bytes_verified_from_disk.load(),
        .bytes_written_direct = tally_.bytes_written_direct.load(),
        .mark_deadlines = tally_.marks.deadlines.load(),
        .marks_given_up = tally_.marks.given_up.load(),
        .receives_unmarked_for_loss = tally_.marks.unmarked_for_loss.load(),
        .seconds = seconds_since(t0_),
        .streams = stream_count_,
        .data_path = stream_host_ ? kHostedRecvPath : target_->data_path(),
        .fallbacks = tally_.fallbacks(),
        .ring_mode = probe_ring_features().setup_mode(),
    };
    s.congestion_control = acceptor_.congestion_control();
    s.deleted = control_side_.deleted();
    s.metadata_not_kept = control_side_.tree_meta().warnings().list();
    if (!control_side_.update_fallback().empty()) s.fallbacks.push_back(control_side_.update_fallback());
    if (!control_side_.sums_cache_note().empty()) s.fallbacks.push_back(control_side_.sums_cache_note());
    // Receives left unmarked on a lossy (or reordering: loopback has some) stream are the
    // mark working as meant: counted in the stats and said in -v. A stream that gave its mark
    // up wakes per segment or so from then on: a slower path, in the fallbacks too.
    bool gave_up = false;
    if (std::string m = tally_.marks_note(&gave_up); !m.empty()) {
        if (gave_up) s.fallbacks.push_back(m);
        log_.verbose_line((gave_up ? "slower path: " : "") + m);
    }
    links_.fill(s);
    if (!links_.path().empty()) {
        log_.verbose_line(links_.handshakes_line());
        if (s.encryption_streams == tls::kStreamsRecords && stream_host_)
            s.data_path = kRecordsHostedRecvPath;
        else if (s.encryption_streams == tls::kStreamsRecords)
            s.data_path = s.data_path == recv_path_name(RecvPath::direct) ? kRecordsDirectRecvPath : kRecordsRecvPath;
    }
    {
        std::vector<std::pair<unsigned, int>> streams;
        std::lock_guard lk(data_mu_);
        for (size_t i = 1; i < data_.size(); ++i)
            if (data_[i]) streams.emplace_back(static_cast<unsigned>(i), data_[i].get());
        s.window_limits = recv_window_limits(streams, s.seconds, &s.window_limits_unjudged);
        for (ConnectionMptcp& c : mptcp_)
            if (c.mptcp && c.stream > 0 && c.stream < data_.size() && data_[c.stream]) c.subflows = mptcp_subflows(data_[c.stream].get());
    }
    if (opts_.mptcp) {
        std::sort(mptcp_.begin(), mptcp_.end(), [](const ConnectionMptcp& a, const ConnectionMptcp& b) { return a.stream < b.stream; });
        s.mptcp_connections = mptcp_;
        s.mptcp = mptcp_summary(mptcp_);
    }
    for (const std::string& w : s.window_limits) log_.verbose_line(w);
    if (!s.window_limits_unjudged.empty()) log_.verbose_line(s.window_limits_unjudged);
    s.control_rtt_us = deadlines_.rtt_us;
    s.idle_timeout_ms = deadlines_.idle_ms;
    add_process_usage(s);
    return s;
}

} // namespace sluice
