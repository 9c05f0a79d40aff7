#include "serve/engine/clients.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace sluice::serve {

namespace {

constexpr double kRateTauS = 5.0; // the "recent" of the recent rate

bool peer_key(int fd, ClientKey& k) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
    if (ss.ss_family == AF_INET6) {
        std::memcpy(k.addr, &reinterpret_cast<sockaddr_in6&>(ss).sin6_addr, 16);
        return true;
    }
    if (ss.ss_family == AF_INET) {
        std::memset(k.addr, 0, 10);
        k.addr[10] = k.addr[11] = 0xff;
        std::memcpy(k.addr + 12, &reinterpret_cast<sockaddr_in&>(ss).sin_addr, 4);
        return true;
    }
    return false;
}

std::string key_text(const ClientKey& k) {
    char buf[INET6_ADDRSTRLEN] = {};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(k.addr, mapped, 12) == 0)
        ::inet_ntop(AF_INET, k.addr + 12, buf, sizeof buf);
    else
        ::inet_ntop(AF_INET6, k.addr, buf, sizeof buf);
    return buf;
}

} // namespace

bool ClientKey::operator==(const ClientKey& o) const { return std::memcmp(addr, o.addr, 16) == 0; }

ClientTable::ClientTable() : rows_(kMaxClients), used_(kMaxClients, 0) {}

uint16_t ClientTable::attach(int fd, int64_t now_ms) {
    ClientKey key;
    if (!peer_key(fd, key)) {
        ++untracked_;
        return kNoClient;
    }
    uint16_t found = kNoClient, free_slot = kNoClient, oldest_idle = kNoClient;
    if (last_hit_ != kNoClient && used_[last_hit_] && rows_[last_hit_].key == key) found = last_hit_;
    for (uint16_t i = 0; found == kNoClient && i < kMaxClients; ++i) {
        if (!used_[i]) {
            if (free_slot == kNoClient) free_slot = i;
        } else if (rows_[i].key == key) {
            found = i;
        } else if (rows_[i].conns == 0 && (oldest_idle == kNoClient || rows_[i].last_ms < rows_[oldest_idle].last_ms)) {
            oldest_idle = i;
        }
    }
    if (found == kNoClient) {
        found = free_slot != kNoClient ? free_slot : oldest_idle;
        if (found == kNoClient) { // every entry has open connections: bounded, so not tracked
            ++untracked_;
            return kNoClient;
        }
        rows_[found] = ClientRow{};
        rows_[found].key = key;
        used_[found] = 1;
    }
    ClientRow& r = rows_[found];
    ++r.conns;
    ++r.accepted;
    r.last_ms = now_ms;
    last_hit_ = found;
    return found;
}

void ClientTable::tick(int64_t now_ms, ClientBoard& board) {
    const double dt = last_tick_ms_ ? static_cast<double>(now_ms - last_tick_ms_) / 1000.0 : 0.0;
    last_tick_ms_ = now_ms;
    const double alpha = dt > 0 ? 1.0 - std::exp(-dt / kRateTauS) : 0.0;
    for (unsigned i = 0; i < kMaxClients; ++i) {
        if (!used_[i]) continue;
        ClientRow& r = rows_[i];
        const uint64_t bytes = r.bytes_sent + r.bytes_received;
        if (dt > 0) {
            r.rate += alpha * (static_cast<double>(bytes - r.seen_bytes) / dt - r.rate);
            r.req_rate += alpha * (static_cast<double>(r.requests - r.seen_requests) / dt - r.req_rate);
        }
        r.seen_bytes = bytes;
        r.seen_requests = r.requests;
    }
    std::lock_guard lock(board.mu);
    board.rows.clear(); // reserved for kMaxClients: no allocation here
    for (unsigned i = 0; i < kMaxClients; ++i)
        if (used_[i]) board.rows.push_back(rows_[i]);
    board.untracked = untracked_;
}

void merge_clients(const std::vector<std::unique_ptr<ClientBoard>>& boards, size_t limit, ServeStats& out) {
    std::map<std::string, ServeClientStats> by;
    for (const auto& b : boards) {
        std::lock_guard lock(b->mu);
        out.clients_untracked += b->untracked;
        for (const ClientRow& r : b->rows) {
            ServeClientStats& c = by[key_text(r.key)];
            c.connections_open += r.conns;
            c.connections += r.accepted;
            c.requests += r.requests;
            c.bytes_sent += r.bytes_sent;
            c.bytes_received += r.bytes_received;
            c.bytes_per_s += r.rate;
            c.requests_per_s += r.req_rate;
        }
    }
    out.clients_tracked = by.size();
    for (auto& [addr, c] : by) {
        c.address = addr;
        out.clients.push_back(std::move(c));
    }
    std::sort(out.clients.begin(), out.clients.end(), [](const ServeClientStats& a, const ServeClientStats& b) {
        return a.bytes_per_s != b.bytes_per_s ? a.bytes_per_s > b.bytes_per_s : a.requests > b.requests;
    });
    if (out.clients.size() > limit) out.clients.resize(limit);
}

} // namespace sluice::serve
