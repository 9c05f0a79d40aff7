#pragma once
// sluice::get(): fetches a file or tree from `sluice serve --port` (sluice::Server with
// get_sessions) over sluice's protocol: N streams, a checksum per block, and resume (run it
// again into the same destination and only what is not yet verified there is sent).
//
//   sluice::GetOptions o;
//   o.streams = 8;
//   sluice::Stats s = sluice::get(sluice::parse_url("sluice://host:7000/?token=T"), "models/m.bin", "/data/in", o);
//
// How: the client starts a Receiver (an ephemeral port, a random one-time token), asks the
// server on one connection, and the server sends to that receiver, connecting back to the
// address the request came from. So the client must be reachable from the server at that
// address (no NAT between them); the request connection carries the server's verdict, and a
// server-side failure cancels the receiver with the server's message.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

#include "sluice/export.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

struct GetOptions {
    unsigned streams = kDefaultStreams;
    RecvPath path = RecvPath::direct;
    bool sync = false;
    bool verify = false;
    int connect_timeout_ms = 10000;
    int idle_timeout_ms = 60000; // the server silent this long fails the get
    std::string bind_address;    // where the receiver listens for the server; empty: all addresses
    bool verbose = false;
    LogFn log;
    Progress* progress = nullptr;
    const std::atomic<bool>* cancel = nullptr; // set to true from any thread to stop
};

// from: the server's sluice port and token (empty for a --public server). remote_path:
// relative to the served directory ("" or "/" for all of it). A file lands as
// dest/NAME, a directory as dest/NAME/..., all of the directory's entries directly in dest.
// Returns the receiver's stats once everything is verified; throws sluice::Error otherwise.
SLUICE_EXPORT Stats get(const Endpoint& from, const std::string& remote_path, const std::filesystem::path& dest, const GetOptions& options);

} // namespace sluice
