#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/export.hpp"

namespace sluice {

// What the kernel reported about one data stream at the end of the transfer (TCP_INFO on the
// sender's socket, where retransmits and the congestion window live).
struct StreamTcp {
    unsigned stream = 0;            // data stream number, from 1
    uint32_t rtt_us = 0;            // smoothed round-trip time
    uint64_t delivery_rate_bps = 0; // the kernel's last delivery-rate sample, in bits per second
    uint64_t bytes_sent = 0;        // bytes TCP sent, retransmissions included
    uint64_t bytes_retrans = 0;     // of those, retransmitted
    uint32_t total_retrans = 0;     // retransmitted segments
    uint32_t cwnd = 0;              // congestion window, in segments
    uint32_t mss = 0;
    uint64_t busy_us = 0;           // time with data in flight
    uint64_t rwnd_limited_us = 0;   // of it, held back by the receiver's window
    uint64_t sndbuf_limited_us = 0; // of it, held back by the send buffer
    // An MPTCP connection: how many subflows the figures above sum (each subflow's TCP_INFO;
    // rtt and the times are the largest of them). 0: a plain TCP connection's TCP_INFO.
    unsigned subflows = 0;
};

// One line of a sender's --dry-run list (rsync's --itemize-changes): what the receiver would do
// to one path. item: "YXcstpoguax" (Y: '>' data sent, 'c' created or changed, 'h' hard link,
// '.' attributes only; X: f d L D S; "+++++++++" new) or "*deleting".
struct ItemizedChange {
    std::string item;
    std::string path;   // relative; a deletion's is the receiver's text: escape it before a terminal (printable())
    std::string target; // symlinks: their target ("->"); hard links: the path linked to ("=>")
    uint64_t bytes = 0; // a file to send: its size (an update by changed blocks may send less)
};

// What --mptcp gave one connection of the transfer (issue 16).
struct ConnectionMptcp {
    unsigned stream = 0;   // 0: the control connection, else the data stream number
    bool mptcp = false;    // the connection runs Multipath TCP
    std::string why;       // when it does not: why (the kernel lacks MPTCP or has it off, the peer answered in TCP)
    unsigned subflows = 0; // MPTCP subflows beyond the first (MPTCP_INFO), when last read
};

// Final figures of one side of a transfer; the CLI's --json prints exactly these fields.
// One kind of the sender's metadata a receiver did not keep (one warning line of its log):
// owners without the privilege to set them, or what RecvOptions::sender_trust leaves out.
struct MetadataNotKept {
    std::string kind;     // "owners", "set-id bits", "file capabilities", "trusted.* extended attributes", ...
    uint64_t entries = 0; // how many entries lost it
    std::string first;    // the first such entry's path
    std::string why;
};

struct Stats {
    std::string role;           // "send" or "recv"
    uint64_t bytes = 0;         // payload bytes of regular files in the transfer
    uint64_t bytes_sent = 0;    // payload moved in this run (sender) / received (receiver)
    uint64_t bytes_skipped = 0; // already verified at the receiver (resume)
    uint64_t bytes_holes = 0;   // holes of sparse files: described, never sent (docs/protocol.md)
    uint64_t bytes_reused = 0;  // unchanged blocks of files the receiver had in another version
    // Receiver, updates: old versions whose block sums came from the block-sums cache, old
    // versions hashed (read whole) instead, and files whose sums were stored in the cache.
    uint64_t files_sums_cached = 0;
    uint64_t files_sums_hashed = 0;
    uint64_t files_sums_stored = 0;
    // Sender: bytes read with O_DIRECT because they were not in the page cache (sent from the
    // buffer they were read into; encrypted, sealed from it); the rest of bytes_sent came
    // through the page cache.
    uint64_t bytes_read_direct = 0;
    uint64_t files = 0;         // regular files
    uint64_t dirs = 0;
    uint64_t symlinks = 0;
    uint64_t skipped_entries = 0; // fifos, sockets, devices (sender)
    uint64_t blocks = 0;
    // Memory against the file count (issue 19): the receiver's most manifest entries held in
    // its file table at once (not yet released); the sender's most regular files announced
    // and not yet complete at the receiver.
    uint64_t files_held_peak = 0;
    uint64_t checksum_failures = 0;
    uint64_t bytes_verified_from_disk = 0; // receiver with --verify
    uint64_t bytes_written_direct = 0;     // receiver: written with O_DIRECT from its own buffers
    // Receiver: what its data streams' low-water marks did (issue 16; TCP wakes a reader once
    // a mark's bytes are in order). Marked waits that ended by their deadline (1 s) instead of
    // their mark; times a stream gave its mark up after those (it then wakes per segment or
    // so); receives left without a mark because out-of-order data had arrived (a lossy path).
    uint64_t mark_deadlines = 0;
    uint64_t marks_given_up = 0;
    uint64_t receives_unmarked_for_loss = 0;
    double seconds = 0;
    unsigned streams = 0;
    unsigned streams_used = 0;  // sender: streams that took work at the end (--streams auto can use fewer)
    std::string streams_choice; // sender with --streams auto: the count chosen, each step measured, and why
    std::string pacing;         // sender: how its streams were paced together (send/session/stream_pacer.hpp); "" if not
    std::string pacing_choice;  // sender: whether they were to be paced together, and why (SendOptions::pacing)
    unsigned streams_reopened = 0;       // sender: data stream connections that broke and were reopened
    uint64_t bytes_resent_after_break = 0; // sender: what those connections had not delivered, sent again
    uint64_t block_size = 0;
    std::string data_path;              // the path that moved the bytes
    std::vector<std::string> fallbacks; // every slower path taken, with its reason
    std::string ring_mode;              // io_uring setup flags in use
    std::string encryption = "off";     // "off", "tls13-user" (records sealed in user space) or "tls13-ktls"
    std::string encryption_why;         // why that record layer (the kernel's answer to the tls ULP)
    // How the data streams' records are made: "records" (sealed and opened in place on each
    // stream's own buffer by its send or receive path), "relay" (two threads and a socket
    // pair under an unchanged path: pipe mode and Sink targets), "ktls"; empty when off.
    std::string encryption_streams;
    // TLS handshakes this side ran: "certificate" (full: X.509, signature; the control
    // connection in certificate mode), "resumed" (PSK keyed from that session: each data stream
    // in certificate mode), "psk" (the token's PSK: every connection otherwise).
    std::string tls_mode;                 // "psk", "certificate" or empty when off
    unsigned tls_full_handshakes = 0;
    unsigned tls_resumed_handshakes = 0;
    unsigned tls_psk_handshakes = 0;
    std::string peer_certificate;         // certificate mode: "sha256:HEX" of the peer's key (SPKI), if it sent one
    std::string tls_cipher;               // the records' cipher suite (TLS_AES_128_GCM_SHA256); empty when off
    // Who seals and opens this side's records: "ipsec-mb" (intel-ipsec-mb's VAES path),
    // "openssl" (its EVP) or "kernel" (kTLS); and why: the library, its version and CPU path,
    // or why the faster engine did not run. Empty when off.
    std::string tls_record_engine;
    std::string tls_record_engine_why;
    double cpu_user_s = 0;
    double cpu_sys_s = 0;
    uint64_t peak_rss_kb = 0;
    std::string congestion_control;     // TCP_CONGESTION of the data streams, as the kernel reports it
    std::vector<StreamTcp> tcp_streams; // sender only
    // Each sysctl cap on a socket buffer that held a stream's window down, with the value that
    // would lift it: tcp_wmem at the sender, tcp_rmem at the receiver (also logged with -v).
    std::vector<std::string> window_limits;
    // Data streams left out of window_limits, and why (MPTCP connections); "" when none was.
    std::string window_limits_unjudged;
    // Receiver with --delete: what it removed (relative paths, a directory after its contents).
    std::vector<std::string> deleted;
    // Receiver: what of the sender's tree metadata was not kept, one per kind (also logged).
    std::vector<MetadataNotKept> metadata_not_kept;
    // Sender with --dry-run: nothing was sent or changed; changes lists what would be, entries
    // in manifest order, then deletions (a directory after its contents).
    bool dry_run = false;
    std::vector<ItemizedChange> changes;
    // --mptcp: "off" (not asked), "on" (every connection runs MPTCP) or "fallback" (at least
    // one runs plain TCP; mptcp_connections says which and why, as -v does).
    std::string mptcp = "off";
    std::vector<ConnectionMptcp> mptcp_connections; // with --mptcp: each connection, control first
    // Deadlines that scale with the round trip (issue 16): each is the one asked, or 64 x (the
    // control connection's round trip + 200 ms) where that is longer (at most 10 minutes more).
    uint32_t control_rtt_us = 0; // the control connection's smoothed RTT when they were chosen (0: not measured)
    int idle_timeout_ms = 0;     // the peer's silence that fails the transfer
    int connect_timeout_ms = 0;  // sender: a data stream's connect and reopen

    double throughput_mb_s() const { return seconds > 0 ? bytes_sent / seconds / 1e6 : 0; }
    SLUICE_EXPORT std::string to_json() const;
};

} // namespace sluice
