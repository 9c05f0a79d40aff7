#pragma once
// Per-client counters for /_stats: requests, bytes each way and a recent rate, per client
// address, kept by each ring thread for its own connections. Bounded: at most kMaxClients
// addresses per thread; when full, the least recently active address with no open connection
// is forgotten, and a connection from a new address finding every entry busy is counted as
// untracked instead. No allocation after construction; the owning thread publishes a copy
// every tick (200 ms) for /_stats and stats(), which read it under a lock.
#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sluice/server.hpp"

namespace sluice::serve {

inline constexpr uint16_t kNoClient = 0xffff;

struct ClientKey {
    uint8_t addr[16] = {}; // IPv4 as ::ffff:a.b.c.d
    bool operator==(const ClientKey& o) const;
};

struct ClientRow {
    ClientKey key;
    uint32_t conns = 0;   // open connections of this thread from this address
    uint64_t requests = 0, bytes_sent = 0, bytes_received = 0;
    uint64_t accepted = 0; // connections
    int64_t last_ms = 0;  // last activity
    double rate = 0;      // bytes/s each way together, exponentially weighted (about 5 s)
    double req_rate = 0;  // requests/s, likewise
    uint64_t seen_bytes = 0, seen_requests = 0; // at the last tick
};

// The copy a thread publishes; read by other threads.
struct ClientBoard {
    std::mutex mu;
    std::vector<ClientRow> rows;
    uint64_t untracked = 0; // connections from an address that found no entry
};

class ClientTable {
public:
    static constexpr unsigned kMaxClients = 256;
    ClientTable();
    // A new connection from `peer` (its fd's getpeername): the entry's index, or kNoClient.
    uint16_t attach(int fd, int64_t now_ms);
    void detach(uint16_t i) {
        if (i != kNoClient && rows_[i].conns) --rows_[i].conns;
    }
    void request(uint16_t i, int64_t now_ms) {
        if (i == kNoClient) return;
        ++rows_[i].requests;
        rows_[i].last_ms = now_ms;
    }
    void sent(uint16_t i, uint64_t n) {
        if (i != kNoClient) rows_[i].bytes_sent += n;
    }
    void received(uint16_t i, uint64_t n) {
        if (i != kNoClient) rows_[i].bytes_received += n;
    }
    // Every tick: the rates, then a copy into the board.
    void tick(int64_t now_ms, ClientBoard& board);

private:
    std::vector<ClientRow> rows_; // kMaxClients, in use: rows_[i].key set and used_[i]
    std::vector<uint8_t> used_;
    uint64_t untracked_ = 0;
    int64_t last_tick_ms_ = 0;
    uint16_t last_hit_ = kNoClient; // most clients come back: checked first
};

// Every thread's boards merged by address (a client can have connections on several threads),
// the `limit` busiest by recent rate.
void merge_clients(const std::vector<std::unique_ptr<ClientBoard>>& boards, size_t limit, ServeStats& out);

} // namespace sluice::serve
