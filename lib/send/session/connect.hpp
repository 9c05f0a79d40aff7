#pragma once
// Opening a transfer on the sending side: the control connection and every data stream,
// each authenticated and bound to one random transfer id. The data streams open in the
// background (stream_opener.hpp): the session sends on each as soon as it is open.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/io/rtt_deadlines.hpp"
#include "core/io/unique_fd.hpp"
#include "core/tls/links.hpp"
#include "core/wire/protocol.hpp"
#include "send/session/stream_opener.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

struct Connections {
    wire::ClientHello hello; // the transfer's (id, features): a reopened data stream sends it again
    UniqueFd control;
    uint8_t features = 0; // wire::kFeature* bits both sides use (the receiver offered them)
    uint16_t offered = 0; // every bit the receiver's hello offered (kFeatureExactMeta is answered in TREE_OPTIONS)
    bool encrypted = false;
    ConnectionMptcp control_mptcp; // what --mptcp gave the control connection (core/io/mptcp.hpp)
    // The control connection's TCP congestion control, read before encryption puts a relay's
    // socket pair in its place (TCP_CONGESTION on that is an error): every data stream is set
    // the same way (--cc, else the system's), so this is theirs too.
    std::string congestion_control;
    // The idle and connect deadlines scaled by the control connection's round trip, measured
    // by its handshake (core/io/rtt_deadlines.hpp); the data streams open under them.
    RttDeadlines deadlines;
    // The data streams opened: opts.streams, or kDefaultStreams where --streams auto met a path
    // under StreamGovernor::kMinRttUs; then auto_fixed says so (Stats::streams_choice).
    unsigned streams = 0;
    std::string auto_fixed;
    // `to` was a sluice serve's port that took a push (push_request.hpp): every connection
    // attaches through it (SendOptions::connection), keyed by the push's transfer token.
    bool push = false;
    // The control connection's lowest round trip (its SYN's), read before encryption puts a
    // relay's socket pair in its place: what says a long path (2 ms or more: the end in pieces, work_queue.hpp).
    uint32_t path_us = 0;
};

// One connection to the receiver: SendOptions::connection when set (a socket handed in by
// the caller), else a TCP (or with opts.mptcp, an MPTCP) connect to `to`. Throws Error(network) naming the address.
UniqueFd open_connection(const Endpoint& to, const SendOptions& opts);

// Where the data streams land, owned by the session and sized here (index i is stream i + 1).
// Each element is written by that stream's open alone, before StreamOpener says it is open.
struct DataStreams {
    // What the session writes frames on. Each holds a placeholder socket from the start, so
    // its number is stable (the governor, the pacer and shutdowns hold numbers): a stream's
    // connection takes that number (dup2) as soon as it is connected, before its handshake,
    // so that shutting the session's streams down also ends a handshake in flight.
    std::vector<UniqueFd>& data;
    // Encrypted through relays (pipe mode): data holds what the session writes plain frames
    // on (tls::Links), and tcp the TCP connections (TCP_INFO, congestion control), placeholders
    // from the start like data's, each taking its connection's number. Else empty.
    std::vector<UniqueFd>& tcp;
    // Encrypted with records (the file sender): data holds the TCP connections themselves,
    // and keys[i] the record keys of data[i] (none where the kernel took them). Else empty.
    std::vector<std::optional<tls::LinkKeys>>& keys;
};

// Connects and authenticates the control connection, then starts opening the data streams
// on `opener` (their failures come out of StreamOpener::await). Throws Error(network / auth)
// naming the address tried. links runs the TLS handshake of each connection when encrypting
// (opts.encrypt, the receiver's address); on_fail is told a failure of an encrypted
// connection found by its relay. records: the session's send paths seal their own records on
// the data streams (the file sender); otherwise every connection goes under a relay (pipe
// mode). stopped: the transfer stopped, no new stream starts opening. Everything the opener's
// threads use (links, out, on_fail, stopped) must outlive opener.join().
// A `to` whose first bytes are a sluice serve's GET_HELLO is asked for a push first; then
// to.token becomes the push's transfer token and opts.connection attaches each connection,
// so whatever opens a connection later (a stream's reconnect) goes the same way.
Connections connect_transfer(Endpoint& to, SendOptions& opts, tls::Links& links,
                             std::function<void(const Error&)> on_fail, bool records, DataStreams out,
                             StreamOpener& opener, std::function<bool()> stopped);

} // namespace sluice
