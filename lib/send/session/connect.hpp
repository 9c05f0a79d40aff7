#pragma once
// Opening a transfer on the sending side: the control connection and every data stream,
// each authenticated and bound to one random transfer id.
#include <vector>

#include "core/io/unique_fd.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

struct Connections {
    UniqueFd control;
    std::vector<UniqueFd> data; // data[i] is stream i + 1
};

// Throws Error(network / auth) naming the address tried.
Connections connect_transfer(const Endpoint& to, const SendOptions& opts);

// Ending a transfer from the sending side. send_transfer_end throws if the control
// connection is gone; abort_transfer is best effort: it tells the receiver why (ABORT with
// code) and shuts every connection down so that no thread stays blocked reading.
void send_transfer_end(int control, uint32_t data_streams, uint64_t blocks, uint64_t bytes, int idle_timeout_ms);
void abort_transfer(int control, const std::vector<UniqueFd>& data, uint32_t code, const std::string& why);

} // namespace sluice
