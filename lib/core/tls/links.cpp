#include "core/tls/links.hpp"

#include <unistd.h>

#include <chrono>

#include "core/io/sys_error.hpp"
#include "core/tls/aes_gcm.hpp"
#include "core/tls/ktls.hpp"

namespace sluice::tls {

namespace {
constexpr const char* kKernelWhy = "the kernel seals and opens the records (tls ULP)";
} // namespace

std::string link_name(unsigned index) { return index == 0 ? "the control connection" : "data stream " + std::to_string(index); }

void Links::use_certificates(std::shared_ptr<const CertContext> certs, std::string host, int wait_ms) {
    std::lock_guard lk(mu_);
    certs_ = std::move(certs);
    host_ = std::move(host);
    wait_ms_ = wait_ms;
}

void Links::stop() {
    std::lock_guard lk(mu_);
    stopped_ = true;
    session_cv_.notify_all();
}

std::shared_ptr<const CertContext> Links::take_certificates() {
    std::lock_guard lk(mu_);
    return std::move(certs_);
}

void Links::verified_by_request(std::string spki) {
    std::lock_guard lk(mu_);
    request_spki_ = std::move(spki);
}

bool Links::certificates() const {
    std::lock_guard lk(mu_);
    return certs_ != nullptr;
}

void Links::await_session(const std::string& who) {
    std::unique_lock lk(mu_);
    const bool ready = session_cv_.wait_for(lk, std::chrono::milliseconds(wait_ms_),
                                            [this] { return session_ || control_failed_ || stopped_; });
    if (session_) return;
    if (!ready)
        throw Error(ErrorCode::network, "TLS handshake with " + who + ": the control connection's certificate handshake "
                                        "did not end within " + std::to_string(wait_ms_ / 1000) + " s", ErrorCause::timed_out);
    if (control_failed_)
        throw Error(control_failed_->code(), "TLS handshake with " + who + ": the control connection's certificate handshake "
                                             "failed: " + control_failed_->what(), control_failed_->cause());
    throw Error(ErrorCode::network, "TLS handshake with " + who + ": stopped before the control connection's certificate "
                                    "handshake ended");
}

LinkKeys Links::shake(int tcp, Side side, const Psk& psk, const std::string& peer, unsigned index) {
    const std::string who = peer + " (" + link_name(index) + ")";
    std::shared_ptr<const CertContext> certs;
    {
        std::lock_guard lk(mu_);
        certs = certs_;
    }
    if (!certs) {
        LinkKeys k = handshake(tcp, side, psk, who);
        std::lock_guard lk(mu_);
        ++psk_;
        return k;
    }
    if (index == 0) {
        auto failed = [this](Error e) {
            std::lock_guard lk(mu_);
            control_failed_ = std::move(e);
            session_cv_.notify_all();
        };
        try {
            CertOutcome r = certs->handshake(tcp, host_, who);
            std::lock_guard lk(mu_);
            session_.emplace(r.session, psk);
            r.session.fill(0);
            peer_spki_ = r.peer_spki;
            ++full_;
            session_cv_.notify_all();
            return r.keys;
        } catch (const Error& e) {
            failed(e);
            throw;
        } catch (...) {
            failed(Error(ErrorCode::internal, "an unexpected failure"));
            throw;
        }
    }
    await_session(who);
    Psk stream_psk;
    {
        std::lock_guard lk(mu_);
        stream_psk = resumed_psk(session_->first, session_->second, psk);
    }
    LinkKeys k = handshake(tcp, side, stream_psk, who);
    stream_psk.fill(0);
    std::lock_guard lk(mu_);
    ++resumed_;
    return k;
}

UniqueFd Links::secure(int tcp, Side side, const Psk& psk, const std::string& peer, unsigned index,
                       std::function<void(const Error&)> on_fail) {
    LinkKeys keys = shake(tcp, side, psk, peer, index);
    std::string why;
    if (attach_ktls(tcp, why)) {
        install_ktls(tcp, keys);
        UniqueFd same(::dup(tcp));
        if (!same) throw_errno(ErrorCode::internal, "dup");
        std::lock_guard lk(mu_);
        path_ = kPathKernel;
        why_ = kKernelWhy;
        if (index > 0) streams_ = kStreamsKernel;
        return same;
    }
    UniqueFd mine(::dup(tcp)); // the relay's own reference: the caller keeps tcp for stats and shutdown
    if (!mine) throw_errno(ErrorCode::internal, "dup");
    auto relay = std::make_unique<Relay>(std::move(mine), keys, link_name(index), std::move(on_fail));
    UniqueFd plain = relay->take_plain();
    std::lock_guard lk(mu_);
    relays_.push_back(std::move(relay));
    path_ = kPathUser;
    why_ = why;
    if (index > 0) streams_ = kStreamsRelay;
    return plain;
}

std::optional<LinkKeys> Links::open_records(int tcp, Side side, const Psk& psk, const std::string& peer, unsigned index) {
    LinkKeys keys = shake(tcp, side, psk, peer, index);
    std::string why;
    const bool kernel = attach_ktls(tcp, why);
    if (kernel) install_ktls(tcp, keys);
    std::lock_guard lk(mu_);
    path_ = kernel ? kPathKernel : kPathUser;
    why_ = kernel ? kKernelWhy : why;
    streams_ = kernel ? kStreamsKernel : kStreamsRecords;
    if (kernel) return std::nullopt;
    return keys;
}

std::string streams_text(const std::string& streams) {
    if (streams == kStreamsRecords)
        return "records sealed and opened in place on each stream's own buffer by its send or receive path (no relay); the "
               "control connection through a relay";
    if (streams == kStreamsRelay) return "through a relay (two threads and a socket pair per connection) under an unchanged path";
    if (streams == kStreamsKernel) return "the kernel's TLS under an unchanged path";
    return "none yet";
}

std::string Links::streams() const {
    std::lock_guard lk(mu_);
    return streams_;
}

void Links::fill(Stats& s) const {
    std::lock_guard lk(mu_);
    if (path_.empty()) return;
    s.encryption = path_;
    s.encryption_why = why_;
    s.encryption_streams = streams_;
    s.tls_mode = certs_ ? "certificate" : request_spki_.empty() ? "psk" : "certificate-request";
    s.tls_full_handshakes = full_ + (request_spki_.empty() ? 0 : 1);
    s.tls_resumed_handshakes = resumed_;
    s.tls_psk_handshakes = psk_;
    s.peer_certificate = peer_spki_.empty() ? request_spki_ : peer_spki_;
    s.tls_cipher = kCipherSuite;
    if (path_ == kPathKernel) {
        s.tls_record_engine = "kernel";
        s.tls_record_engine_why = kKernelWhy;
    } else {
        const GcmChoice& c = gcm_choice();
        s.tls_record_engine = c.name;
        s.tls_record_engine_why = c.why;
    }
}

std::string Links::records_line() const {
    const std::string head = std::string("TLS records: ") + kCipherSuite + ", ";
    if (path() == kPathKernel) return head + "sealed and opened by the kernel";
    const GcmChoice& c = gcm_choice();
    return head + "sealed and opened by " + c.name + " (" + c.why + ")";
}

std::string Links::handshakes_line() const {
    std::lock_guard lk(mu_);
    if (!certs_) return "TLS handshakes: " + std::to_string(psk_) + " keyed by the token's PSK (no certificates)";
    return "certificate mode: " + std::to_string(full_) + " full handshake (X.509), " + std::to_string(resumed_) +
           " resumed from its session (PSK, no certificate)" + (peer_spki_.empty() ? "" : "; the peer's key " + peer_spki_);
}

std::string Links::path() const {
    std::lock_guard lk(mu_);
    return path_;
}

std::string Links::why() const {
    std::lock_guard lk(mu_);
    return why_;
}

void Links::close() {
    std::vector<std::unique_ptr<Relay>> r;
    {
        std::lock_guard lk(mu_);
        r.swap(relays_);
    }
    r.clear();
}

} // namespace sluice::tls
