#pragma once
// sluice::get(): fetches a file or tree from `sluice serve --port` (sluice::Server with
// get_sessions) over sluice's protocol: N streams, a checksum per block, and resume (run it
// again into the same destination and only what is not yet verified there is sent).
//
//   sluice::GetOptions o;
//   o.streams = 8;
//   sluice::Stats s = sluice::get(sluice::parse_url("sluice://host:7000/?token=T"), "models/m.bin", "/data/in", o);
//
// How: the client starts a Receiver (a random one-time token), asks the server on one
// connection, then opens the transfer's connections (1 + streams) to the same port, each
// naming the request (GET_ATTACH), and hands them to the Receiver: the server connects
// nowhere, so a client behind NAT can get. With connect_back, the server instead connects to
// the Receiver's port at the address the request came from (the client must be reachable
// there). The request connection carries the server's verdict, and a server-side failure
// cancels the receiver with the server's message.
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
    // The server connects to this side's Receiver instead of this side connecting out (the
    // first protocol of get sessions; a server from before GET_ATTACH needs it).
    bool connect_back = false;
    std::string bind_address;    // connect_back: where the receiver listens for the server; empty: all addresses
    // Multipath TCP on every connection (SendOptions::mptcp); with connect_back the receiver
    // listens with MPTCP. Where the kernel, the server or the path lacks it, plain TCP, said
    // per connection in Stats::mptcp ("fallback") and mptcp_connections (and with verbose).
    bool mptcp = false;
    // The transfer's connections (ServerHello's bit 3): automatic encrypts unless the server
    // is on a loopback address; the server follows this side's choice.
    Encrypt encrypt = Encrypt::automatic;
    // Certificate mode (docs/guarantees.md, "Certificates"): ca_file and/or pins verify the
    // server (its `serve --cert`) in a TLS 1.3 handshake on the request connection before the
    // request is sent; cert_file and key_file answer a server that asks for a client certificate
    // (`serve --ca`/`--pin`); crl_file needs ca_file. A server without a certificate is refused
    // (auth), never asked unauthenticated. Turns encryption on (off with it is a usage error).
    Certificates certificates;
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
