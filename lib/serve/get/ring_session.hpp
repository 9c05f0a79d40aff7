#pragma once
// One get session's transfer on the get ring (serve/get/ring_gets): a file or a tree to the
// client's receiver over the connections it attached (GET_ATTACH), or, with --connect-back,
// over connections the ring connects out to the client's receiver (IORING_OP_CONNECT: the
// control connection first, then the data streams once it is ready, as send() opens them), as
// the public send() would send it, but as a state machine driven by completions: no thread of
// its own, and nothing on the ring thread that waits (checksums on the SumPool; sockets
// non-blocking).
//   link 0: control: hello, MANIFEST pages (at most 1,024 entries and about 1 MiB each,
//           encoded as the socket takes them) + MANIFEST_END, a MANIFEST_ACK per page (resume
//           ranges: that page's files are planned then), RESEND, ALL_VERIFIED, FINAL_STATUS;
//           TRANSFER_END once every stream has ended
//   links 1..streams: data: hello, then BLOCK frames, STREAM_END
// In clear text (a receiver that does not encrypt: loopback), file data goes by sendfile from
// pages the pool's read just brought in. Encrypted (the receiver's hello says so: every
// client not on loopback), each connection runs the TLS 1.3 PSK handshake after the hello,
// stepped on its non-blocking socket (tls::SteppedHandshake); control frames are then sealed
// and opened here, and each data stream's blocks are read, summed and sealed into the stream's
// own record buffer (SealedBlock: on the ring where the block is in the page cache, else on the
// pool), which the ring sends (ring_session_tls.cpp).
// Bounded: at most streams + 1 blocks (8 MiB each) summed ahead, or 64 small ones, a control
// frame of at most 256 KiB, manifest bytes queued up to 256 KiB, one deadline renewed by
// progress (the attach wait first, then the server's send timeout).
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/ring/ring.hpp"
#include "core/tls/handshake.hpp"
#include "core/tls/record.hpp"
#include "core/wire/codec.hpp"
#include "serve/engine/cold_reads.hpp"
#include "serve/get/admission.hpp"
#include "serve/get/attachments.hpp"
#include "serve/get/sources.hpp"
#include "serve/get/sum_pool.hpp"
#include "sluice/error.hpp"

namespace sluice::serve {

struct Shared;

// --connect-back: where the ring connects the transfer's connections. Only ever the address
// the request came from, with the request's reply_port (connect_back_to(): never an address
// a request names).
struct ConnectBack {
    sockaddr_storage addr{};
    socklen_t len = 0;  // 0: no connect-back (the client attaches its connections)
    std::string name;   // "host:port", for messages
    int connect_ms = 0; // the control connection's connect, scaled with the request's round trip
};
// The request connection's address with port instead of its own; false when getpeername fails.
bool connect_back_to(int request_fd, uint16_t port, int connect_ms, ConnectBack& out);

// What the ring hands a session after its GET_REPLY ok.
struct RingStart {
    UniqueFd request;                        // GET_DONE goes here at the end
    std::unique_ptr<Attachments::Slot> slot; // the connections the client attaches
    GetSources src;    // what is sent: a file, or a tree's entries (its manifest: src.entries)
    std::string label; // "'path' by host", for -v
    uint16_t streams = 1;
    std::string receiver_token;
    int attach_wait_ms = 10000;
    int idle_ms = 60000;
    uint64_t rate = 0;   // --get-rate-limit: bytes per second of the session (all its streams); 0: none
    Admission admission; // the place under --max-gets, given back when the session goes
    ConnectBack back;    // --connect-back: the ring connects out (back.len != 0) instead of waiting for attaches
    // Certificate mode: the request connection is TLS (its handshake and GET_REQUEST stepped on
    // the ring: ring_request_tls.cpp); GET_DONE is sealed with its keys.
    std::unique_ptr<tls::Sealer> request_sealer;
};

class RingSession {
public:
    // Completion tags: slot << kTagBits | link * 2 + (0 read, 1 write); the request's read is kRequestTag.
    static constexpr unsigned kTagBits = 9;
    static constexpr uint64_t kRequestTag = 2 * (wire::kMaxStreams + 1);
    // The largest control frame taken from the receiver: a MANIFEST_ACK of a full page (1,024
    // entries) with about ten resume ranges per file.
    static constexpr size_t kMaxControlFrame = 256u << 10;

    RingSession(RingStart s, Shared& sh, Ring& ring, SumPool& pool, uint32_t slot, uint32_t gen, int64_t now_ms);
    ~RingSession();
    RingSession(const RingSession&) = delete;
    RingSession& operator=(const RingSession&) = delete;

    void on_completion(uint64_t low_tag, Completion& c, int64_t now_ms);
    void on_attach(int64_t now_ms); // the Attachments may hold a new connection for this get
    void on_sum(const SumJob& j, int64_t now_ms);
    void tick(int64_t now_ms); // the deadline
    void cancel();             // the server stops
    bool finished() const;     // ended, and nothing of the ring or the pool names it: may go
    uint32_t gen() const { return gen_; }
    // A directory asked for (its entries, empty or not), not a single file.
    bool tree() const { return s_.src.entries.size() != 1 || s_.src.entries[0].kind != wire::EntryKind::file; }

private:
    struct Link {
        explicit Link(uint64_t tag_base) : rd_c(tag_base), wr_c(tag_base + 1) {}
        UniqueFd fd;
        uint16_t index = 0;
        enum class St : uint8_t { connecting, hello, auth, shaking, ready } st = St::hello;
        std::vector<unsigned char> in; // received (encrypted control: records not yet opened)
        wire::Bytes out;               // to send (encrypted control: frames not yet sealed)
        size_t out_off = 0;
        std::array<unsigned char, wire::kNonceBytes> nonce{}; // ours, for ServerAuth's MAC
        std::array<unsigned char, wire::kNonceBytes> server_nonce{};
        bool has_block = false;
        int blk_fd = -1;                   // the file the block is of
        uint64_t blk_off = 0, blk_end = 0; // file bytes owed once out is sent
        uint64_t blocks = 0, bytes = 0;    // whole blocks this stream carried (STREAM_END)
        bool end_queued = false;
        // Encrypted (the receiver's hello asked for it): the handshake, then the record layer.
        bool tls = false;
        tls::Psk psk{};
        std::unique_ptr<tls::SteppedHandshake> shake;
        std::unique_ptr<tls::Sealer> sealer;   // control: frames sealed into wire
        std::unique_ptr<tls::Opener> opener;   // control: in opened into plain
        std::vector<unsigned char> plain;      // control: opened bytes, whole frames taken from here
        std::vector<unsigned char> wire;       // control: sealed records to send
        size_t wire_off = 0;
        std::unique_ptr<SealedBlock> sealed;   // data: the block (or STREAM_END) being sent
        bool sealing = false;                  // data: the pool is filling sealed
        Completion rd_c, wr_c;
    };
    struct Block {
        uint32_t file = 0; // its entry
        uint64_t off = 0, len = 0, sum = 0;
    };
    struct Range {
        uint32_t file = 0;
        uint64_t off = 0, end = 0; // [off, end)
    };
    struct File { // a regular file's entry (fd -1: a directory or symlink, nothing to read)
        int fd = -1;
        FileKey key{};
        uint64_t size = 0;
    };

    // ring_session.cpp: connections, completions, reading
    void add_link(UniqueFd fd);
    void read_link(Link& l);
    // Up to `most` more bytes into l.in: false when none came now (a poll is armed) or the
    // session failed (the client closed, or the connection broke).
    bool receive(Link& l, size_t most);
    // After a send on l returned n: true to go on (bytes went, or EINTR), false when the
    // socket is full (POLLOUT armed) or the session failed.
    bool sent(Link& l, ssize_t n);
    // ring_session_hello.cpp: the sluice hello of each connection
    void on_hello_bytes(Link& l);
    void on_secure(Link& l); // the handshake ended: keys in place (encrypted), then ready
    // ring_session_connect.cpp: --connect-back's connections
    void connect_link(); // one more connection out to s_.back, its connect on the ring
    void on_connected(Link& l, Completion& c);
    void connect_streams(); // the control connection is ready: the data streams
    void connect_more();    // more data streams, while fewer than 8 are between connect and hello
    // ring_session_drive.cpp: writing
    bool flush(Link& l); // false: the socket is full (POLLOUT armed) or the session failed
    void drive();        // hands blocks to idle streams, ends streams, writes what is owed
    void watch_request();
    void drive_control(Link& ctl);
    // --get-rate-limit: a token bucket of the session, refilled by the clock, at most a
    // quarter second (and at least 64 KiB) of burst. allowance() is what may go now (all when
    // there is no limit); at 0 the stream waits, and the next tick (200 ms) drives again.
    uint64_t allowance();
    void spend(uint64_t n) { tokens_ -= static_cast<double>(n); }
    // ring_session_end.cpp: the deadline, failure and the end
    void fail(ErrorCode code, const std::string& why, ErrorCause cause = ErrorCause::none);
    void finish(uint32_t status, const std::string& message);
    // ring_session_manifest.cpp: the manifest's pages, and the plan of each page once acked
    void open_files();
    size_t control_queued(const Link& l) const;
    void send_pages(Link& l); // encodes pages while little of the control's is queued
    void plan(const wire::ManifestAck& a);
    bool next_range(uint64_t most, Range& r); // resends first, then the plan; r.end - r.off <= most
    // ring_session_frames.cpp: the control connection's frames, and the sums ahead
    void on_control_bytes(std::vector<unsigned char>& in);
    void on_frame(uint8_t type, wire::Span payload);
    void queue_sums();
    SumJob job(const Range& r) const;
    // ring_session_tls.cpp: an encrypted session's connections
    void start_tls(Link& l);
    void shake(Link& l);
    void read_records(Link& l);
    bool flush_tls(Link& l);
    void drive_sealed(Link& l);
    void on_sealed(const SumJob& j);
    bool sealed(Link& l, const SumJob& j); // a block is in l's records: counted (false: the read failed)
    bool cached(const SumJob& j);          // the block may be read on the ring: in the page cache, no read of it in flight
    std::string who(const Link& l) const;

    Shared& sh_;
    Ring& ring_;
    SumPool& pool_;
    RingStart s_;
    std::vector<File> files_; // by entry (file_id)
    uint32_t slot_, gen_;
    uint64_t tag_base_;
    int64_t now_ms_ = 0, deadline_ms_ = 0;
    std::vector<std::unique_ptr<Link>> links_; // in the order attached: 0 control, then data 1..
    Completion req_c_;
    unsigned char req_byte_ = 0;
    std::array<unsigned char, wire::kTransferIdBytes> transfer_id_{};
    // The manifest: entries sent up to next_entry_, in pages starting at page_first_[seq].
    size_t next_entry_ = 0;
    std::vector<uint64_t> page_first_;
    uint32_t pages_acked_ = 0;
    // What to send: resend_ first, then needed_ (each acked page's files minus the resume
    // ranges, in entry order); summed ahead in ready_.
    std::deque<Range> needed_, resend_;
    std::deque<Block> ready_;
    unsigned sums_in_flight_ = 0;
    uint64_t ahead_bytes_ = 0; // of the blocks in ready_ and on the pool (clear sessions)
    bool manifest_ended_ = false, all_verified_ = false, transfer_end_ = false;
    bool ended_ = false, ok_ = false, counted_open_ = false, encrypted_ = false;
    uint64_t sent_bytes_ = 0;
    double tokens_ = 0;       // --get-rate-limit: bytes the session may send (negative: owed)
    int64_t refilled_ms_ = 0; // when tokens_ was last refilled
    bool paced_ = false;      // a stream waits for tokens: the next tick drives
    uint64_t ring_sealed_ = 0, pool_sealed_ = 0; // encrypted: where each block was sealed (-v)
    uint64_t in_flight_ = 0; // of pool_sealed_: counted cached, but a pool read of it was in flight (-v)
    unsigned connecting_ = 0;      // --connect-back: connects in flight
    unsigned streams_left_ = 0;    // --connect-back: data streams not connected yet
    int stream_connect_ms_ = 0;    // --connect-back: a data stream's connect, scaled with the control's round trip
};

} // namespace sluice::serve
