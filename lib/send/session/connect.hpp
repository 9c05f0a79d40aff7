#pragma once
// Opening a transfer on the sending side: the control connection and every data stream,
// each authenticated and bound to one random transfer id.
#include <functional>
#include <optional>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/tls/links.hpp"
#include "core/wire/protocol.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

struct Connections {
    wire::ClientHello hello; // the transfer's (id, features): a reopened data stream sends it again
    UniqueFd control;
    std::vector<UniqueFd> data; // data[i] is stream i + 1
    uint8_t features = 0;       // wire::kFeature* bits both sides use (the receiver offered them)
    // Encrypted: data holds what the session writes plain frames on (tls::Links), and tcp
    // the TCP connections themselves (TCP_INFO, congestion control). Empty otherwise.
    std::vector<UniqueFd> tcp;
    // Encrypted with records (connect_transfer's records): data holds the TCP connections
    // themselves, and keys[i] the record keys of data[i] (none where the kernel took them).
    std::vector<std::optional<tls::LinkKeys>> keys;
    bool encrypted = false;
};

// One connection to the receiver: SendOptions::connection when set (a socket handed in by
// the caller), else a TCP connect to `to`. Throws Error(network) naming the address.
UniqueFd open_connection(const Endpoint& to, const SendOptions& opts);

// Throws Error(network / auth) naming the address tried. links runs the TLS handshake of each
// connection when encrypting (opts.encrypt, the receiver's address); on_fail is told a
// failure of an encrypted connection found by its relay. records: the session's send paths
// seal their own records on the data streams (the file sender); otherwise every connection
// goes under a relay (pipe mode).
Connections connect_transfer(const Endpoint& to, const SendOptions& opts, tls::Links& links,
                             std::function<void(const Error&)> on_fail, bool records);

} // namespace sluice
