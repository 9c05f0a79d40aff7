#pragma once
// An encrypted connection under an unchanged session (docs/design.md, "Encryption"): the
// session reads and writes plain frames on one end of a socket pair, and two threads move
// them through the record layer (record.hpp) to and from the TCP connection. Every path of
// both directions (control frames, every send and receive path, pipe mode, resume) works
// encrypted this way without knowing it.
//
// It costs a copy through the socket pair on the receiving side (the sender's splice and
// sendfile paths move pages into the pair by reference), and two thread hand-offs per
// buffer; the dedicated encrypted send path (lib/send/paths/tls_sender.cpp) writes records
// straight onto the TCP connection instead.
#include <functional>
#include <string>
#include <thread>

#include "core/io/unique_fd.hpp"
#include "core/tls/keys.hpp"
#include "sluice/error.hpp"

namespace sluice::tls {

class Relay {
public:
    // on_fail is told a failure of the connection itself (a record that fails its tag, a
    // reset) before the session's end is shut down, so that it wins over the end of file the
    // session then sees. what: "data stream 2" or "the control connection".
    Relay(UniqueFd tcp, const LinkKeys& keys, std::string what, std::function<void(const Error&)> on_fail);
    // Sends what the session wrote before, then closes the connection.
    ~Relay();
    Relay(const Relay&) = delete;
    Relay& operator=(const Relay&) = delete;

    // The session's end (plain frames), handed over once.
    UniqueFd take_plain() { return std::move(plain_); }
    int tcp() const { return tcp_.get(); }

private:
    void outbound(); // session -> seal -> TCP
    void inbound();  // TCP -> open -> session
    void failed(const Error& e);

    UniqueFd tcp_;
    UniqueFd plain_; // the session's end until taken
    UniqueFd mine_;  // the relay's end of the pair
    LinkKeys keys_;
    std::string what_;
    std::function<void(const Error&)> on_fail_;
    std::thread out_;
    std::thread in_;
};

} // namespace sluice::tls
