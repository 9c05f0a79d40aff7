#pragma once
// sluice::Server: serves a directory over HTTP/1.1 to many clients at once (issue 15).
//
//   sluice::ServeOptions o;
//   o.http_port = 8080;
//   o.token = "secret";                 // or o.public_reads = true
//   sluice::Server server("/data/out", o); // listens; throws on a bad directory or port
//   std::thread t([&] { server.run(); }); // returns after stop() has drained
//   ...
//   server.stop();                      // from any thread: finish what is in flight, then return
//
// A small fixed set of threads, each with its own io_uring and listening socket
// (SO_REUSEPORT); no thread per connection. GET and HEAD, one byte range, conditional
// requests, keep-alive and pipelining, directory listings (HTML or JSON) and /_stats.
// Bodies go from the page cache to the socket with sendfile (no user-space copy); parts of a
// file not in the page cache are read in by a small pool of threads, never on a ring's thread.
// Nothing outside the directory is served or written. With allow_upload, PUT and POST store
// a file (temporary name, renamed when complete; sync_uploads: acknowledged when durable).
// With get_sessions, a second port speaks sluice's protocol to `sluice get` / sluice::get()
// (sluice/get.hpp): the file or tree is sent as a transfer with N streams, checksums and
// resume, by the public send() on a thread per session (not on the rings yet), to a receiver
// the client listens with; the server connects to it at the address the request came from.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "sluice/export.hpp"
#include "sluice/sluice.hpp"

namespace sluice {

struct ServeOptions {
    std::string bind_address;  // empty: all addresses
    uint16_t http_port = 0;    // 0: one chosen by the system (port() says which)
    unsigned threads = 0;      // 0: the online CPUs
    bool public_reads = false; // serve GET/HEAD without a token
    std::string token;         // required as "Authorization: Bearer TOKEN" or ?token= unless public_reads
    unsigned max_connections = 16384; // over all threads; more are closed at once
    int request_timeout_ms = 10000;   // from a request's first byte to its blank line
    int idle_timeout_ms = 60000;      // a keep-alive connection with no request
    int send_timeout_ms = 60000;      // a response that makes no progress (a client not reading)
    int drain_timeout_ms = 10000;     // after stop(): responses in flight get this long
    unsigned cold_read_threads = 2;   // the HTTP engine's pool that reads parts not in the page cache (each get ring has its own pool of 4)
    bool get_sessions = false;        // listen on `port` for sluice-protocol get sessions
    uint16_t port = 0;                // that port; 0: one chosen by the system (get_port() says which)
    unsigned max_get_sessions = 64;   // get sessions sending at once; more are refused (busy)
    uint64_t max_get_files = 16384;   // files one get session may send (each is held open)
    uint64_t get_rate_limit = 0;      // bytes per second of each get session; 0 = unlimited
    // The get port listens with Multipath TCP (SendOptions::mptcp): it accepts MPTCP and plain
    // TCP clients alike; with verbose, each get session's log says which its request came over.
    bool get_mptcp = false;
    // Uploads: PUT or POST of one file with a Content-Length, written to a temporary name
    // beneath the directory and renamed into place once the whole body arrived. They always
    // need the token, public_reads or not (so allow_upload needs a token).
    bool allow_upload = false;
    bool sync_uploads = false;              // answer only once the file and its directory are fsynced
    uint64_t max_upload_bytes = 1ull << 30; // a larger Content-Length gets 413
    unsigned max_uploads = 64;              // bodies being received at once, over all threads; more get 503
    int upload_timeout_ms = 300000;         // a whole body, from the end of its head
    // Pushes (`sluice send` / sluice::send() into the directory over the sluice port; need
    // get_sessions and allow_upload, and the token even with public_reads): at most this many
    // received at once over all rings, more are refused (busy). Each is received by a Receiver
    // of its own (its threads, not the rings: docs/design.md, "Pushes"), with the same
    // temporary names, checksums, resume and confinement as `sluice recv DIR`.
    unsigned max_pushes = 16;
    // What a pusher may store (RecvOptions::sender_trust; docs/guarantees.md, "What a pusher
    // may store"): the token lets a client write files into the directory, not act as this
    // host's root. none (the default): every entry is the server's own user and group, no
    // set-id bits, only user.* attributes and ACLs naming no one. owners (--push-keep-owners):
    // owners and groups kept by name as `sluice recv` keeps them (a backup fleet's), still no
    // set-id bits, capabilities, security.* or trusted.* attributes. full
    // (--push-keep-privileges): everything, as a root `sluice recv`. What is not kept is said
    // per kind to the pusher, in the log and in push_metadata_not_kept.
    SenderTrust push_trust = SenderTrust::none;
    // HTTPS: with both, the HTTP port speaks TLS 1.3 only (TLS_AES_128_GCM_SHA256, ALPN
    // http/1.1) with this certificate (PEM, leaf first) and key; the handshake is stepped on the
    // ring threads and responses are sealed by the record engine (docs/design.md, "HTTPS").
    // Checked when the Server is made (usage error naming the file and the reason).
    // With get_sessions, the same certificate authenticates the server on its sluice port to a
    // `sluice get --ca/--pin` (docs/protocol.md, "Get sessions", certificate mode).
    std::string cert_file;
    std::string key_file;
    // The sluice port's clients in certificate mode (need cert_file and get_sessions): a client
    // must show a certificate chaining to a CA in ca_file (and not revoked by crl_file) and/or
    // whose key is one of pins ("sha256:HEX"); a request without one is refused. The HTTP port
    // does not ask for client certificates.
    std::string ca_file;
    std::vector<std::string> pins;
    std::string crl_file;
    bool verbose = false;
    LogFn log; // one line per event worth a line (start-up, paths chosen); default: dropped
};

// One client address in /_stats (its connections on every thread together).
struct ServeClientStats {
    std::string address;
    uint64_t connections_open = 0;
    uint64_t connections = 0; // accepted while tracked
    uint64_t requests = 0;
    uint64_t bytes_sent = 0, bytes_received = 0;
    double bytes_per_s = 0;    // both ways, recent: exponentially weighted over about 5 s
    double requests_per_s = 0; // likewise
};

struct ServeStats {
    uint64_t connections_accepted = 0;
    uint64_t connections_open = 0;
    uint64_t connections_refused = 0;  // over max_connections
    uint64_t connections_timed_out = 0; // closed by a request, idle or send deadline
    uint64_t requests = 0;
    uint64_t responses_2xx = 0, responses_3xx = 0, responses_4xx = 0, responses_5xx = 0;
    uint64_t bytes_sent = 0;      // heads and bodies
    uint64_t body_bytes_sent = 0; // of which bodies
    uint64_t cold_reads = 0;      // ranges read in by the cold-read pool before sending
    uint64_t cold_waits = 0;      // ranges found cached but still being read in by the pool: waited for there
    uint64_t get_sessions = 0;        // accepted get sessions (sluice protocol)
    uint64_t get_sessions_open = 0;   // sending now
    uint64_t get_sessions_failed = 0; // refused (token, path, busy, bad request) or ended in an error
    uint64_t get_bytes_sent = 0;      // file bytes sent by finished get sessions
    uint64_t uploads = 0;             // files stored (renamed into place)
    uint64_t uploads_open = 0;        // bodies being received now
    uint64_t uploads_failed = 0;      // refused or not completed (the temporary file removed)
    uint64_t upload_bytes = 0;        // body bytes received
    // Pushes (sluice send into the directory): asked for, being received now, stored (every
    // file verified and in place), refused (uploads off, wrong token, busy, a bad request),
    // failed after they began (the sender gone, a deadline, a checksum given up on), file bytes
    // stored by finished pushes, their data streams received on the sluice port's rings;
    // push_path says how they are received.
    uint64_t pushes = 0, pushes_open = 0, pushes_done = 0, pushes_refused = 0, pushes_failed = 0;
    uint64_t push_bytes = 0, push_streams_ring = 0;
    // Of pushes: asked in certificate mode (the request in TLS records after a handshake with
    // the server's certificate; a handshake that failed is counted under the gets', as the
    // request that says which came after it).
    uint64_t pushes_certificate = 0;
    std::string push_path;
    // What a push may store (ServeOptions::push_trust), and what pushes sent that was not
    // kept, per kind over every push so far (entries summed; the first push's first entry).
    std::string push_metadata;
    std::vector<MetadataNotKept> push_metadata_not_kept;
    unsigned threads = 0;
    // Per client address, the busiest 100 by recent rate (up to 200 ms old: each thread
    // publishes its table every tick). Bounded: 256 addresses per thread; a connection from a
    // new address when all 256 have open connections is counted in clients_untracked.
    uint64_t clients_tracked = 0;
    uint64_t clients_untracked = 0;
    std::vector<ServeClientStats> clients;
    std::string recv_path;  // "multishot recv, provided buffers" or the slower path and why
    std::string accept_path;
    std::string cold_check; // "cachestat" or why there is none
    std::string ring_mode;
    // Get sessions (sluice protocol): transfers sent on the get rings, every one since h15t
    // (files and trees, paced by --get-rate-limit or not; of them encrypted: the client's
    // receiver encrypts, as every one not on loopback does; of them trees: a directory asked
    // for; of them connected back: --connect-back, the ring connecting out), and which path
    // takes which. get_sessions_thread counted gets sent by a session thread each, which no get
    // is since h15t: always 0, kept so that readers of it keep working.
    uint64_t get_sessions_ring = 0;
    uint64_t get_sessions_ring_encrypted = 0;
    uint64_t get_sessions_ring_tree = 0;
    uint64_t get_sessions_ring_connect_back = 0;
    uint64_t get_sessions_thread = 0;
    // Of all get sessions: requests in certificate mode (a TLS 1.3 handshake with the server's
    // certificate on the request connection, stepped on the get ring), and those whose
    // certificate handshake failed (a client refusing the server's certificate, or refused its own).
    uint64_t get_sessions_certificate = 0;
    uint64_t get_certificate_failed = 0;
    std::string get_path;
    // HTTPS (cert_file): handshakes ended, refused or abandoned (a bad ClientHello, a client
    // refusing the certificate, a client that closed mid-handshake, plain HTTP: also counted
    // in tls_plain_http), timed out (also in
    // connections_timed_out), connections closed for a record that failed its tag, broke TLS's
    // limits or was cut short by the client's close; which record engine seals, and why.
    bool https = false;
    uint64_t tls_handshakes = 0, tls_handshakes_failed = 0, tls_plain_http = 0, tls_handshakes_timed_out = 0;
    uint64_t tls_bad_records = 0;
    std::string tls_path;
    SLUICE_EXPORT std::string to_json() const;
};

class Server {
public:
    // Opens the directory and the listening sockets; throws sluice::Error (destination for
    // the directory, network for the port, usage for options).
    SLUICE_EXPORT Server(const std::filesystem::path& dir, ServeOptions options);
    SLUICE_EXPORT ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    SLUICE_EXPORT uint16_t port() const;
    // The sluice-protocol port of get sessions; 0 when get_sessions is off.
    SLUICE_EXPORT uint16_t get_port() const;
    // Serves until stop(); then stops accepting, lets responses in flight finish (up to
    // drain_timeout_ms), closes every connection and returns. Throws if a thread failed.
    SLUICE_EXPORT void run();
    // Safe from any thread (not from a signal handler: use a thread that waits for signals).
    SLUICE_EXPORT void stop();
    SLUICE_EXPORT ServeStats stats() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace sluice
