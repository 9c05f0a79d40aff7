#pragma once
// Opening a transfer on the sending side: the control connection and every data stream,
// each authenticated and bound to one random transfer id.
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/wire/protocol.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

struct Connections {
    wire::ClientHello hello; // the transfer's (id, features): a reopened data stream sends it again
    UniqueFd control;
    std::vector<UniqueFd> data; // data[i] is stream i + 1
    uint8_t features = 0;       // wire::kFeature* bits both sides use (the receiver offered them)
};

// Throws Error(network / auth) naming the address tried.
Connections connect_transfer(const Endpoint& to, const SendOptions& opts);

} // namespace sluice
