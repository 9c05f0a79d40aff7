#include <cstdio>
#include <string>

#include "sluice/progress.hpp"
#include "sluice/stats.hpp"

namespace sluice {

namespace {

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                char b[8];
                std::snprintf(b, sizeof b, "\\u%04x", c);
                out += b;
            } else {
                out.push_back(static_cast<char>(c));
            }
        }
    }
    return out + "\"";
}

std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

} // namespace

std::string Stats::to_json() const {
    std::string j = "{";
    auto field = [&](const char* k, const std::string& v) {
        if (j.size() > 1) j += ",";
        j += "\"";
        j += k;
        j += "\":" + v;
    };
    field("role", json_string(role));
    field("bytes", std::to_string(bytes));
    field("bytes_sent", std::to_string(bytes_sent));
    field("bytes_skipped", std::to_string(bytes_skipped));
    field("bytes_holes", std::to_string(bytes_holes));
    field("bytes_reused", std::to_string(bytes_reused));
    field("files_sums_cached", std::to_string(files_sums_cached));
    field("files_sums_hashed", std::to_string(files_sums_hashed));
    field("files_sums_stored", std::to_string(files_sums_stored));
    field("bytes_read_direct", std::to_string(bytes_read_direct));
    field("files", std::to_string(files));
    field("dirs", std::to_string(dirs));
    field("symlinks", std::to_string(symlinks));
    field("skipped_entries", std::to_string(skipped_entries));
    field("blocks", std::to_string(blocks));
    field("checksum_failures", std::to_string(checksum_failures));
    if (role == "recv") field("bytes_verified_from_disk", std::to_string(bytes_verified_from_disk));
    if (role == "recv") {
        field("bytes_written_direct", std::to_string(bytes_written_direct));
        field("mark_deadlines", std::to_string(mark_deadlines));
        field("marks_given_up", std::to_string(marks_given_up));
        field("receives_unmarked_for_loss", std::to_string(receives_unmarked_for_loss));
    }
    field("seconds", num(seconds));
    field("throughput_mb_s", num(throughput_mb_s()));
    field("streams", std::to_string(streams));
    if (role == "send") {
        field("streams_used", std::to_string(streams_used));
        field("streams_choice", json_string(streams_choice));
        field("pacing", json_string(pacing));
        field("pacing_choice", json_string(pacing_choice));
        field("streams_reopened", std::to_string(streams_reopened));
        field("bytes_resent_after_break", std::to_string(bytes_resent_after_break));
    }
    field("block_size", std::to_string(block_size));
    field(role == "send" ? "send_path" : "recv_path", json_string(data_path));
    std::string fb = "[";
    for (size_t i = 0; i < fallbacks.size(); ++i) fb += (i ? "," : "") + json_string(fallbacks[i]);
    field("fallbacks", fb + "]");
    field("ring_mode", json_string(ring_mode));
    field("encryption", json_string(encryption));
    field("encryption_why", json_string(encryption_why));
    field("encryption_streams", json_string(encryption_streams));
    field("tls_mode", json_string(tls_mode));
    field("tls_full_handshakes", std::to_string(tls_full_handshakes));
    field("tls_resumed_handshakes", std::to_string(tls_resumed_handshakes));
    field("tls_psk_handshakes", std::to_string(tls_psk_handshakes));
    field("peer_certificate", json_string(peer_certificate));
    field("tls_cipher", json_string(tls_cipher));
    field("tls_record_engine", json_string(tls_record_engine));
    field("tls_record_engine_why", json_string(tls_record_engine_why));
    field("cpu_user_s", num(cpu_user_s));
    field("cpu_sys_s", num(cpu_sys_s));
    field("peak_rss_kb", std::to_string(peak_rss_kb));
    field("files_held_peak", std::to_string(files_held_peak));
    field("congestion_control", json_string(congestion_control));
    if (role == "send") {
        // Per data stream, from TCP_INFO at the end; the sum is what benches compare.
        std::string ts = "[";
        uint64_t retrans = 0;
        for (size_t i = 0; i < tcp_streams.size(); ++i) {
            const StreamTcp& t = tcp_streams[i];
            retrans += t.bytes_retrans;
            ts += std::string(i ? "," : "") + "{\"stream\":" + std::to_string(t.stream) +
                  ",\"rtt_us\":" + std::to_string(t.rtt_us) +
                  ",\"delivery_rate_bps\":" + std::to_string(t.delivery_rate_bps) +
                  ",\"bytes_sent\":" + std::to_string(t.bytes_sent) +
                  ",\"bytes_retrans\":" + std::to_string(t.bytes_retrans) +
                  ",\"total_retrans\":" + std::to_string(t.total_retrans) + ",\"cwnd\":" + std::to_string(t.cwnd) +
                  ",\"mss\":" + std::to_string(t.mss) + ",\"busy_us\":" + std::to_string(t.busy_us) +
                  ",\"rwnd_limited_us\":" + std::to_string(t.rwnd_limited_us) +
                  ",\"sndbuf_limited_us\":" + std::to_string(t.sndbuf_limited_us) +
                  ",\"subflows\":" + std::to_string(t.subflows) + "}";
        }
        field("tcp_streams", ts + "]");
        field("bytes_retrans", std::to_string(retrans));
    }
    {
        std::string wl = "[";
        for (size_t i = 0; i < window_limits.size(); ++i) wl += (i ? "," : "") + json_string(window_limits[i]);
        field("window_limits", wl + "]");
        field("window_limits_unjudged", json_string(window_limits_unjudged));
    }
    if (role == "send" && dry_run) {
        field("dry_run", "true");
        std::string c = "[";
        for (size_t i = 0; i < changes.size(); ++i)
            c += std::string(i ? "," : "") + "{\"item\":" + json_string(changes[i].item) + ",\"path\":" +
                 json_string(changes[i].path) + ",\"target\":" + json_string(changes[i].target) +
                 ",\"bytes\":" + std::to_string(changes[i].bytes) + "}";
        field("changes", c + "]");
    }
    field("mptcp", json_string(mptcp));
    {
        std::string mc = "[";
        for (size_t i = 0; i < mptcp_connections.size(); ++i) {
            const ConnectionMptcp& c = mptcp_connections[i];
            mc += std::string(i ? "," : "") + "{\"stream\":" + std::to_string(c.stream) +
                  ",\"mptcp\":" + (c.mptcp ? "true" : "false") + ",\"why\":" + json_string(c.why) +
                  ",\"subflows\":" + std::to_string(c.subflows) + "}";
        }
        field("mptcp_connections", mc + "]");
    }
    field("control_rtt_us", std::to_string(control_rtt_us));
    field("idle_timeout_ms", std::to_string(idle_timeout_ms));
    if (role == "send") field("connect_timeout_ms", std::to_string(connect_timeout_ms));
    if (role == "recv") {
        std::string d = "[";
        for (size_t i = 0; i < deleted.size(); ++i) d += (i ? "," : "") + json_string(deleted[i]);
        field("deleted", d + "]");
        std::string m = "[";
        for (size_t i = 0; i < metadata_not_kept.size(); ++i) {
            const MetadataNotKept& k = metadata_not_kept[i];
            m += std::string(i ? "," : "") + "{\"kind\":" + json_string(k.kind) + ",\"entries\":" +
                 std::to_string(k.entries) + ",\"first\":" + json_string(k.first) + ",\"why\":" + json_string(k.why) + "}";
        }
        field("metadata_not_kept", m + "]");
    }
    return j + "}";
}

} // namespace sluice

namespace sluice {

const char* stream_state_name(StreamState s) {
    switch (s) {
    case StreamState::idle: return "idle";
    case StreamState::connecting: return "connecting";
    case StreamState::moving: return "moving";
    case StreamState::waiting: return "waiting";
    case StreamState::done: return "done";
    case StreamState::failed: return "failed";
    }
    return "unknown";
}

} // namespace sluice
