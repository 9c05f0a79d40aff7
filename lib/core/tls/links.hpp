#pragma once
// The encrypted connections of one session (either side): runs each connection's handshake,
// then puts it under the kernel's TLS where the kernel has it (ktls.hpp) or under a relay
// through the user-space record layer (relay.hpp), and reports which ran and why (Stats and -v).
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/tls/cert.hpp"
#include "core/tls/handshake.hpp"
#include "core/tls/relay.hpp"

namespace sluice::tls {

// Stats::encryption values.
inline constexpr const char* kPathKernel = "tls13-ktls";
inline constexpr const char* kPathUser = "tls13-user";
// Stats::encryption_streams values: how the data streams' records are made.
inline constexpr const char* kStreamsKernel = "ktls";       // by the kernel
inline constexpr const char* kStreamsRecords = "records";   // in place on each stream's buffer (record_writer/reader.hpp)
inline constexpr const char* kStreamsRelay = "relay";       // by a relay under an unchanged path (relay.hpp)

class Links {
public:
    // Certificate mode (cert.hpp), before the first link: the control connection (index 0)
    // runs certs' full handshake, host being the name the sender dialled; each data stream
    // then a PSK handshake keyed from that session (resumed_psk), waiting at most wait_ms for
    // it where the data stream's handshake can begin first (the receiver).
    void use_certificates(std::shared_ptr<const CertContext> certs, std::string host, int wait_ms);
    // Wakes data streams waiting for the control connection's session: they fail.
    void stop();
    // In certificate mode (use_certificates() was called).
    bool certificates() const;
    // Leaves certificate mode before the first link and returns its context (null when not
    // in it): a push into a serve verifies the server on its request connection with it, and
    // the transfer's links then run PSK handshakes keyed by the token bound in that session.
    std::shared_ptr<const CertContext> take_certificates();
    // That request connection's full handshake verified the server's key spki: Stats say
    // tls_mode "certificate-request" and peer_certificate spki, the handshake counted as full.
    void verified_by_request(std::string spki);
    // Runs the handshake on tcp (which stays the caller's: shutting it down ends the link too)
    // and returns the fd the session reads and writes plain frames on from now on: tcp itself
    // under kTLS, else the session's end of a relay. index: 0 for the control connection,
    // the stream index for a data stream. Throws what handshake() throws.
    UniqueFd secure(int tcp, Side side, const Psk& psk, const std::string& peer, unsigned index,
                    std::function<void(const Error&)> on_fail);
    // For a data stream whose receive or send path makes its own records: runs the handshake
    // on tcp and returns the record keys, or nothing where the kernel took them (kTLS: the
    // path then reads and writes plain bytes on tcp itself).
    std::optional<LinkKeys> open_records(int tcp, Side side, const Psk& psk, const std::string& peer, unsigned index);
    // kPathKernel or kPathUser once a link is up, and why (the kernel's answer); empty before.
    std::string path() const;
    std::string why() const;
    // kStreams* once a data stream is up; empty before (or with only the control connection).
    std::string streams() const;
    // The encryption fields of Stats (path, why, streams, handshakes by kind, the peer's key);
    // nothing when no link came up.
    void fill(Stats& s) const;
    // -v: the records' cipher suite and who seals them ("TLS records: TLS_AES_128_GCM_SHA256,
    // sealed and opened by ipsec-mb (...)"). Call once a link is up.
    std::string records_line() const;
    // -v: the handshakes so far, by kind ("certificate mode: 1 full handshake, ...").
    std::string handshakes_line() const;
    // Ends every relay (sends what the session wrote first). Call once the session's threads
    // have returned and its fds are closed or shut down.
    void close();
    ~Links() { close(); }

private:
    // The handshake of connection index (by its mode and index); counts it.
    LinkKeys shake(int tcp, Side side, const Psk& psk, const std::string& peer, unsigned index);
    void await_session(const std::string& who);

    mutable std::mutex mu_;
    std::condition_variable session_cv_;
    std::shared_ptr<const CertContext> certs_;
    std::string host_;
    int wait_ms_ = 0;
    std::optional<std::pair<Secret, Psk>> session_; // the control's exporter secret and hello PSK
    // Why the control connection's certificate handshake failed: a data stream waiting for its
    // session fails with the same reason (and code), so whichever thread reports first, the
    // session reports the refusal, not a data stream's consequence of it.
    std::optional<Error> control_failed_;
    bool stopped_ = false;
    unsigned full_ = 0, resumed_ = 0, psk_ = 0;
    std::string peer_spki_;
    std::string request_spki_; // verified_by_request
    std::vector<std::unique_ptr<Relay>> relays_;
    std::string path_, why_, streams_;
};

// How -v says a Links::streams() value: "records sealed and opened in place ...".
std::string streams_text(const std::string& streams);

// "the control connection" or "data stream N", as messages name a connection.
std::string link_name(unsigned index);

} // namespace sluice::tls
