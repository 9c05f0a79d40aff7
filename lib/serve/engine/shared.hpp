#pragma once
// What the threads of one Server share: the directory, the options, each thread's counters
// (written only by that thread, read by /_stats and stats()), the stop flag, and each
// thread's wake-up queue (cold reads done, stop).
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/tls/cert.hpp"
#include "core/tls/web_handshake.hpp"
#include "serve/engine/clients.hpp"
#include "sluice/server.hpp"

namespace sluice::serve {

// One cache line per thread: no thread writes another's line.
struct alignas(64) Counters {
    std::atomic<uint64_t> accepted{0}, open{0}, refused{0}, timed_out{0}, requests{0};
    std::atomic<uint64_t> status_class[6] = {}; // [2] = 2xx ... [5] = 5xx
    std::atomic<uint64_t> bytes{0}, body_bytes{0}, cold_reads{0}, cold_waits{0};
    std::atomic<uint64_t> uploads{0}, uploads_failed{0}, upload_bytes{0};
    // HTTPS (--cert/--key): handshakes ended, refused (plain HTTP among them), timed out, and
    // connections closed for a record that failed (altered, truncated by the client's close).
    std::atomic<uint64_t> tls_handshakes{0}, tls_failed{0}, tls_plain_http{0}, tls_timed_out{0}, tls_bad_records{0};
    void add(std::atomic<uint64_t>& c, uint64_t n = 1) { c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
};

// A cold read finished for connection `conn` (generation `gen`: a connection closed and
// reused meanwhile does not take another's completion).
struct ColdDone {
    uint32_t conn;
    uint32_t gen;
    int err; // 0 or the read's errno
};

// Wakes one ring thread: an eventfd its ring reads, and what is waiting for it.
class WakeQueue {
public:
    WakeQueue();
    int fd() const { return efd_.get(); }
    void push(const ColdDone& d);
    void poke(); // only wakes (stop)
    void take(std::vector<ColdDone>& out);

private:
    UniqueFd efd_;
    std::mutex mu_;
    std::vector<ColdDone> done_;
};

class ColdReads;

struct Shared {
    UniqueFd root;
    std::string root_display;
    ServeOptions opt;
    std::unique_ptr<tls::WebContext> web_tls; // with cert_file: the HTTP port speaks TLS 1.3
    std::string tls_path;                      // which record engine seals, and why
    bool cold_check = false; // cachestat(2) works here
    bool null_sink = false;  // the cold-read pool waits for pages by sendfile into /dev/null
    std::vector<std::unique_ptr<Counters>> counters;
    std::vector<std::unique_ptr<WakeQueue>> wakes;
    std::vector<std::unique_ptr<ClientBoard>> clients; // each thread's published per-client rows
    std::unique_ptr<ColdReads> cold;
    std::atomic<bool> stopping{false};
    std::atomic<unsigned> uploads_open{0}; // over all threads, bounded by opt.max_uploads
    // Bumped by every stored upload: each thread's open-file cache drops what it holds, so a
    // GET after a PUT's answer sees the new file, whichever thread serves it.
    std::atomic<uint64_t> upload_gen{0};
    // Get sessions (serve/get/): written by their threads, read by snapshot().
    std::atomic<uint64_t> get_sessions{0}, get_open{0}, get_failed{0}, get_bytes{0};
    std::atomic<uint64_t> get_ring{0};                // transfers on the get rings (every get's, since h15t)
    std::atomic<uint64_t> get_ring_connect_back{0};   // of get_ring: --connect-back (the ring connected out)
    std::atomic<uint64_t> get_ring_encrypted{0};      // of get_ring: the receiver encrypted (TLS on the ring)
    std::atomic<uint64_t> get_ring_tree{0};           // of get_ring: a directory (a tree's entries)
    std::atomic<unsigned> get_admitted{0};            // sessions holding a --max-gets place (serve/get/admission.hpp)
    // The sluice port's certificate (cert_file with get_sessions): a client that verifies the
    // server runs a TLS 1.3 handshake with it on its request connection (serve/get/ring_request_tls.cpp).
    std::shared_ptr<const tls::CertContext> get_certs;
    std::atomic<uint64_t> get_certificate{0}, get_certificate_failed{0};
    // Pushes (serve/get/push_*.cpp): counted by the rings and the push threads.
    std::atomic<uint64_t> pushes{0}, push_open{0}, push_done{0}, push_refused{0}, push_failed{0}, push_bytes{0};
    std::atomic<unsigned> push_admitted{0}; // pushes holding a --max-pushes place
    std::atomic<uint64_t> push_certificate{0}; // of pushes: asked in certificate mode
    std::atomic<uint64_t> push_streams_ring{0}; // pushes' data streams received on the get rings (PushStreams)
    // Which paths ran, as the first thread found them (the same kernel for all).
    std::mutex paths_mu;
    std::string recv_path, accept_path, cold_check_text, ring_mode;
    std::string get_path; // what the get rings are (their count, pool threads, what they send)
    std::string push_path; // how pushes are received
    std::string push_metadata; // what a push may store (push_trust_text)
    std::vector<MetadataNotKept> push_not_kept; // summed per kind by add_push_not_kept
    // A finished push's Stats::metadata_not_kept, into push_not_kept (push threads).
    void add_push_not_kept(const std::vector<MetadataNotKept>& kinds);

    ServeStats snapshot();
};

} // namespace sluice::serve
