#include "serve/engine/shared.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "core/io/sys_error.hpp"
#include "serve/http/listing.hpp"

namespace sluice::serve {

WakeQueue::WakeQueue() : efd_(::eventfd(0, EFD_CLOEXEC)) {
    if (!efd_) throw_errno(ErrorCode::internal, "eventfd");
}

void WakeQueue::poke() {
    uint64_t one = 1;
    // Cannot fail short of a counter at 2^64-1; a lost wake-up is covered by the loop's tick.
    (void)!::write(efd_.get(), &one, sizeof one);
}

void WakeQueue::push(const ColdDone& d) {
    {
        std::lock_guard lock(mu_);
        done_.push_back(d);
    }
    poke();
}

void WakeQueue::take(std::vector<ColdDone>& out) {
    std::lock_guard lock(mu_);
    out.swap(done_);
}

ServeStats Shared::snapshot() {
    ServeStats s;
    auto r = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    for (const auto& c : counters) {
        s.connections_accepted += r(c->accepted);
        s.connections_open += r(c->open);
        s.connections_refused += r(c->refused);
        s.connections_timed_out += r(c->timed_out);
        s.requests += r(c->requests);
        s.responses_2xx += r(c->status_class[2]);
        s.responses_3xx += r(c->status_class[3]);
        s.responses_4xx += r(c->status_class[4]);
        s.responses_5xx += r(c->status_class[5]);
        s.bytes_sent += r(c->bytes);
        s.body_bytes_sent += r(c->body_bytes);
        s.cold_reads += r(c->cold_reads);
        s.cold_waits += r(c->cold_waits);
        s.uploads += r(c->uploads);
        s.uploads_failed += r(c->uploads_failed);
        s.upload_bytes += r(c->upload_bytes);
        s.tls_handshakes += r(c->tls_handshakes);
        s.tls_handshakes_failed += r(c->tls_failed);
        s.tls_plain_http += r(c->tls_plain_http);
        s.tls_handshakes_timed_out += r(c->tls_timed_out);
        s.tls_bad_records += r(c->tls_bad_records);
    }
    s.get_sessions = get_sessions.load();
    s.get_sessions_open = get_open.load();
    s.get_sessions_failed = get_failed.load();
    s.get_bytes_sent = get_bytes.load();
    s.uploads_open = uploads_open.load();
    s.threads = static_cast<unsigned>(counters.size());
    merge_clients(clients, 100, s);
    std::lock_guard lock(paths_mu);
    s.recv_path = recv_path;
    s.accept_path = accept_path;
    s.cold_check = cold_check_text;
    s.ring_mode = ring_mode;
    s.https = web_tls != nullptr;
    s.tls_path = tls_path;
    s.get_sessions_ring = get_ring.load();
    s.get_sessions_ring_encrypted = get_ring_encrypted.load();
    s.get_sessions_ring_tree = get_ring_tree.load();
    s.get_sessions_ring_connect_back = get_ring_connect_back.load();
    s.get_sessions_certificate = get_certificate.load();
    s.get_certificate_failed = get_certificate_failed.load();
    s.get_path = get_path;
    s.pushes = pushes.load();
    s.pushes_open = push_open.load();
    s.pushes_done = push_done.load();
    s.pushes_refused = push_refused.load();
    s.pushes_failed = push_failed.load();
    s.push_bytes = push_bytes.load();
    s.pushes_certificate = push_certificate.load();
    s.push_streams_ring = push_streams_ring.load();
    s.push_path = push_path;
    s.push_metadata = push_metadata;
    s.push_metadata_not_kept = push_not_kept;
    return s;
}

void Shared::add_push_not_kept(const std::vector<MetadataNotKept>& kinds) {
    std::lock_guard lock(paths_mu);
    for (const MetadataNotKept& k : kinds) {
        auto it = std::find_if(push_not_kept.begin(), push_not_kept.end(),
                               [&](const MetadataNotKept& x) { return x.kind == k.kind; });
        if (it == push_not_kept.end()) push_not_kept.push_back(k);
        else it->entries += k.entries;
    }
}

} // namespace sluice::serve

namespace sluice {

std::string ServeStats::to_json() const {
    std::string o = "{";
    auto num = [&](const char* k, uint64_t v) { o += "\"" + std::string(k) + "\":" + std::to_string(v) + ","; };
    auto str = [&](const char* k, const std::string& v) {
        o += "\"" + std::string(k) + "\":";
        http::append_json_string(o, v);
        o += ",";
    };
    num("connections_accepted", connections_accepted);
    num("connections_open", connections_open);
    num("connections_refused", connections_refused);
    num("connections_timed_out", connections_timed_out);
    num("requests", requests);
    num("responses_2xx", responses_2xx);
    num("responses_3xx", responses_3xx);
    num("responses_4xx", responses_4xx);
    num("responses_5xx", responses_5xx);
    num("bytes_sent", bytes_sent);
    num("body_bytes_sent", body_bytes_sent);
    num("cold_reads", cold_reads);
    num("cold_waits", cold_waits);
    num("get_sessions", get_sessions);
    num("get_sessions_open", get_sessions_open);
    num("get_sessions_failed", get_sessions_failed);
    num("get_bytes_sent", get_bytes_sent);
    num("uploads", uploads);
    num("uploads_open", uploads_open);
    num("uploads_failed", uploads_failed);
    num("upload_bytes", upload_bytes);
    num("threads", threads);
    num("clients_tracked", clients_tracked);
    num("clients_untracked", clients_untracked);
    o += "\"clients\":[";
    for (const ServeClientStats& c : clients) {
        o += "{\"address\":";
        http::append_json_string(o, c.address);
        o += ",\"connections_open\":" + std::to_string(c.connections_open) +
             ",\"connections\":" + std::to_string(c.connections) + ",\"requests\":" + std::to_string(c.requests) +
             ",\"bytes_sent\":" + std::to_string(c.bytes_sent) + ",\"bytes_received\":" + std::to_string(c.bytes_received) +
             ",\"bytes_per_s\":" + std::to_string(static_cast<uint64_t>(c.bytes_per_s)) +
             ",\"requests_per_s\":" + std::to_string(static_cast<uint64_t>(c.requests_per_s)) + "},";
    }
    if (o.back() == ',') o.pop_back();
    o += "],";
    str("recv_path", recv_path);
    str("accept_path", accept_path);
    str("cold_check", cold_check);
    str("ring_mode", ring_mode);
    num("get_sessions_ring", get_sessions_ring);
    num("get_sessions_ring_encrypted", get_sessions_ring_encrypted);
    num("get_sessions_ring_tree", get_sessions_ring_tree);
    num("get_sessions_ring_connect_back", get_sessions_ring_connect_back);
    num("get_sessions_thread", get_sessions_thread);
    num("get_sessions_certificate", get_sessions_certificate);
    num("get_certificate_failed", get_certificate_failed);
    str("get_path", get_path);
    num("pushes", pushes);
    num("pushes_open", pushes_open);
    num("pushes_done", pushes_done);
    num("pushes_refused", pushes_refused);
    num("pushes_failed", pushes_failed);
    num("push_bytes", push_bytes);
    num("pushes_certificate", pushes_certificate);
    num("push_streams_ring", push_streams_ring);
    str("push_path", push_path);
    str("push_metadata", push_metadata);
    o += "\"push_metadata_not_kept\":[";
    for (const MetadataNotKept& k : push_metadata_not_kept) {
        o += "{\"kind\":";
        http::append_json_string(o, k.kind);
        o += ",\"entries\":" + std::to_string(k.entries) + ",\"first\":";
        http::append_json_string(o, k.first);
        o += ",\"why\":";
        http::append_json_string(o, k.why);
        o += "},";
    }
    if (o.back() == ',') o.pop_back();
    o += "],";
    o += std::string("\"https\":") + (https ? "true" : "false") + ",";
    num("tls_handshakes", tls_handshakes);
    num("tls_handshakes_failed", tls_handshakes_failed);
    num("tls_plain_http", tls_plain_http);
    num("tls_handshakes_timed_out", tls_handshakes_timed_out);
    num("tls_bad_records", tls_bad_records);
    str("tls_path", tls_path);
    o.back() = '}';
    return o;
}

} // namespace sluice
