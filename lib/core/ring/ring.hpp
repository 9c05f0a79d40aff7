#pragma once
// One io_uring per thread. Set up with the cheapest completion mode the kernel offers
// (SINGLE_ISSUER + DEFER_TASKRUN, else COOP_TASKRUN, else plain) and probed for the
// opcodes the data paths need, so callers can say which path ran and why.
//
// The ring owns the completion discipline (the shape of TigerBeetle's src/io/linux.zig):
// callers never touch an SQE. Each request is tied to a Completion the caller owns, which
// holds the request's state; user_data is its address. Results are mapped to an Outcome once,
// here. Linked chains are queued whole or not at all, and nothing is in flight once the
// ring is gone, so memory a request points to only has to outlive the Ring (or the Completion).
#include <liburing.h>

#include <cstdint>
#include <span>
#include <string>

struct iovec;
struct sockaddr;

namespace sluice {

struct RingFeatures {
    bool single_issuer = false;
    bool defer_taskrun = false;
    bool coop_taskrun = false;
    bool op_splice = false;
    bool op_send = false;
    bool op_recv = false;
    bool op_write = false;
    bool op_read = false;
    bool op_send_zc = false;
    bool op_openat = false;
    bool op_close = false;
    bool op_statx = false;
    bool op_read_fixed = false;
    bool op_write_fixed = false;
    bool op_accept = false;
    bool op_poll = false;
    bool op_connect = false;
    std::string setup_mode() const; // "single_issuer+defer_taskrun", "coop_taskrun" or "plain"
};

class Ring;

// One request from queueing to its last CQE. Its address is the request's user_data, so it
// neither copies nor moves. Destroyed in flight (an error unwinding), it cancels and reaps
// every request of its ring first, so memory declared before it, or outliving it, is never
// written after release whichever of the two, ring or completion, goes first. (One owed a
// SEND_ZC notification waits for it: keep those completions declared before their ring, so
// that the ring goes first and writes the notifications off.)
class Completion {
public:
    enum class Outcome : uint8_t {
        ok,        // result() is the byte count (or 0)
        retry,     // EINTR, or EAGAIN on a socket or pipe: queue it again
        cancelled, // a link before it fell short, its link timeout fired, or the ring was torn down
        failed,    // error() says why
    };

    Completion() = default;
    explicit Completion(uint64_t tag) : tag(tag) {}
    Completion(const Completion&) = delete;
    Completion& operator=(const Completion&) = delete;
    ~Completion();

    // The caller's own meaning (a buffer index, a step of a chain); the ring never reads it.
    uint64_t tag = 0;

    bool busy() const { return ring_ != nullptr; } // a CQE is still owed
    Outcome outcome() const { return outcome_; }
    int result() const { return res_ > 0 ? res_ : 0; }
    int error() const { return res_ < 0 ? -res_ : 0; }
    // IORING_CQE_F_MORE / IORING_CQE_F_NOTIF of the last CQE (SEND_ZC reports twice).
    uint32_t flags() const { return flags_; }
    // For SEND_ZC's notification CQE: res carries IORING_NOTIF_USAGE_ZC_COPIED.
    uint32_t raw_result() const { return static_cast<uint32_t>(res_); }

private:
    friend class Ring;
    Ring* ring_ = nullptr;
    Completion* prev_ = nullptr; // the ring's list of completions in flight
    Completion* next_ = nullptr;
    uint8_t op_ = 0;
    Outcome outcome_ = Outcome::ok;
    int res_ = 0;
    uint32_t flags_ = 0;
};

class Ring {
public:
    explicit Ring(unsigned entries);
    // Cancels every request in flight and reaps it before the ring goes, whatever owns the
    // memory it points to (SEND_ZC notifications excepted: the kernel pins those pages).
    ~Ring();
    Ring(const Ring&) = delete;
    Ring& operator=(const Ring&) = delete;

    // Queues one request tied to c (which must not be busy). Inside a Chain the request is
    // linked to the next one; otherwise a full queue is submitted to make room.
    void recv(Completion& c, int fd, void* buf, size_t len, int msg_flags, bool poll_first = false);
    void send(Completion& c, int fd, const void* buf, size_t len, int msg_flags);
    // buf_index < 0: an unregistered buffer.
    void send_zc(Completion& c, int fd, const void* buf, size_t len, int msg_flags, unsigned zc_flags, int buf_index);
    void read(Completion& c, int fd, void* buf, unsigned len, uint64_t offset, int buf_index = -1);
    void write(Completion& c, int fd, const void* buf, unsigned len, uint64_t offset, int buf_index = -1);
    void splice(Completion& c, int fd_in, int64_t off_in, int fd_out, int64_t off_out, unsigned len, unsigned flags);
    // For servers (lib/serve/): accept on a listening socket (multishot: one CQE per connection,
    // flags() has IORING_CQE_F_MORE while it stays armed; result() is the new fd); a receive
    // into a buffer the kernel picks from provided-buffer group `group` (ProvidedBuffers; the
    // buffer id is flags() >> IORING_CQE_BUFFER_SHIFT), multishot where asked; a one-shot poll.
    void accept(Completion& c, int fd, int flags, bool multishot);
    void recv_provided(Completion& c, int fd, uint16_t group, bool multishot);
    void poll(Completion& c, int fd, unsigned events);
    // A connect of the non-blocking socket fd to addr (which must outlive the request): ok once
    // connected, failed with the connect's errno.
    void connect(Completion& c, int fd, const sockaddr* addr, unsigned addr_len);
    // Asks the kernel to end c's request (a multishot one included); c's own CQE follows,
    // usually cancelled. Does not wait: for loops that must not stall on one connection.
    void cancel(Completion& c);
    // Provided-buffer rings (ProvidedBuffers owns the memory): the kernel's result, 0 or -errno.
    int register_buf_ring(void* ring_addr, unsigned entries, uint16_t group);
    void unregister_buf_ring(uint16_t group) noexcept;
    // Bounds the request queued just before it, in the same Chain. ts must outlive the request.
    void link_timeout(Completion& c, const __kernel_timespec& ts);

    // Requests queued while a Chain is open run in order, and a short or failed one cancels
    // the rest. The chain's entries are reserved when it opens (queued requests are submitted
    // first if they are in the way), so it reaches the kernel whole; a chain longer than the
    // ring is a bug and throws.
    class Chain {
    public:
        Chain(const Chain&) = delete;
        Chain& operator=(const Chain&) = delete;
        ~Chain();

    private:
        friend class Ring;
        explicit Chain(Ring& r) : ring_(r) {}
        Ring& ring_;
    };
    [[nodiscard]] Chain chain(unsigned max_requests);

    // Submits what is queued without waiting.
    void submit();
    // One CQE: the completion it belongs to, with its outcome set (a SEND_ZC completion comes
    // back twice: the send, then its notification). What is queued is submitted whenever it
    // has to wait, so a request queued before wait() is never left behind.
    Completion& wait();
    // As wait(), but gives up after timeout_ms without a CQE and returns nullptr: for waits on
    // what only the peer can end (SEND_ZC notifications come when it has taken the data).
    Completion* wait_for(int timeout_ms);
    // Whether a CQE is waiting to be taken: for loops that hand the thread on only when some
    // other request has something for it. With DEFER_TASKRUN the kernel posts completions only
    // when asked, so this asks first (one io_uring_enter, nothing submitted, no wait).
    bool completions_waiting();
    // Requests in flight (CQEs owed, SEND_ZC notifications included).
    unsigned in_flight() const { return owed_; }
    unsigned entries() const { return sq_entries_; }

    // Registers buffers for READ_FIXED / WRITE_FIXED / SEND_ZC (index = position in bufs),
    // replacing any registered before. Returns the kernel's error (negative errno) or 0:
    // callers fall back and say so (RLIMIT_MEMLOCK, old kernels).
    int register_buffers(std::span<const iovec> bufs);

    const RingFeatures& features() const noexcept { return features_; }

private:
    friend class Completion;
    io_uring_sqe* take_sqe(Completion& c, uint8_t op);
    void complete(io_uring_cqe* cqe, Completion*& out);
    // Cancels every request and reaps them all (ring_ending: all but SEND_ZC notifications,
    // which are written off). Never throws.
    void cancel_all(bool ring_ending) noexcept;
    void unlink(Completion& c) noexcept;
    void queue_cancel(uint64_t user_data, unsigned flags) noexcept;

    io_uring ring_{};
    RingFeatures features_;
    bool buffers_registered_ = false;
    unsigned sq_entries_ = 0;
    unsigned owed_ = 0;        // CQEs owed by requests in flight
    unsigned notifs_owed_ = 0; // of which SEND_ZC notifications
    unsigned chain_left_ = 0;  // SQEs reserved for the open chain
    bool chain_open_ = false;
    bool cancel_any_refused_ = false;
    io_uring_sqe* chain_last_ = nullptr;
    Completion* in_flight_ = nullptr;
};

// Probes once per process (without keeping a ring) what this kernel offers.
const RingFeatures& probe_ring_features();

} // namespace sluice
