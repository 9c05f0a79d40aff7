#pragma once
// Blocking TCP helpers for set-up and control traffic. Data paths use the ring instead.
#include <cstdint>
#include <span>
#include <string>

#include "core/io/unique_fd.hpp"

namespace sluice {

struct ListenOptions {
    int backlog = 1024;
    bool reuse_port = false; // several listeners on one port, one per ring thread (serve)
    bool mptcp = false;      // an MPTCP listener where the kernel gives one (core/io/mptcp.hpp)
};
UniqueFd listen_tcp(const std::string& bind_address, uint16_t port, ListenOptions options = {});
uint16_t local_port(int fd);
// Connects within timeout_ms; the error names host, port and the address tried.
// mptcp: an MPTCP socket where the kernel gives one (core/io/mptcp.hpp says what it became).
UniqueFd connect_tcp(const std::string& host, uint16_t port, int timeout_ms, bool mptcp = false);

void set_nodelay(int fd);
// Sets or clears O_NONBLOCK; throws internal (an fd whose flags cannot be changed is a bug).
void set_nonblocking(int fd, bool on);
void set_socket_buffers(int fd, int bytes);
void set_io_timeout(int fd, int ms); // SO_RCVTIMEO and SO_SNDTIMEO (0: none); throws internal
// A timeout as messages give it: "60 s", or "0.3 s" for one under a second (the library's
// callers may set milliseconds).
std::string timeout_text(int ms);

// Sends or receives exactly the span, or throws a network Error naming `what`, with its cause:
// peer_closed (end of file), timed_out (SO_RCVTIMEO/SO_SNDTIMEO passed), peer_reset.
void send_all(int fd, std::span<const unsigned char> data, const char* what);
// For a send, sendfile or splice to a blocking socket that failed with err: EAGAIN there means
// SO_SNDTIMEO passed without the peer taking a byte (cause timed_out), never "try again".
[[noreturn]] void throw_send_errno(const std::string& what, int err);
void recv_exact(int fd, std::span<unsigned char> data, const char* what);
// Waits up to timeout_ms for fd to have something to read (or its end, or an error); returns
// false when the time passed first. Lets a reader judge silence by its own deadline, which
// SO_RCVTIMEO, fixed when a read starts, cannot follow.
bool wait_readable_for(int fd, int timeout_ms);
// Bytes of ours the peer's TCP has acknowledged so far (TCP_INFO; 0 where unavailable). A
// waiter whose deadline passed while this moved was waiting on a slow peer, not a silent
// one: io_uring sends take as long as the link needs, and SO_SNDTIMEO does not bound them.
uint64_t bytes_acked(int fd) noexcept;
// Data the peer has received so far, acknowledged or selectively acknowledged (TCP_INFO's
// tcpi_delivered segments x the MSS: an estimate, exact for full segments; 0 where
// unavailable). Unlike bytes_acked it does not leap when a loss is repaired: the bytes SACKed
// behind a hole count as they arrive, not all at once when the hole is filled. A rate taken
// per round trip from bytes_acked on a lossy stream spikes with each repair (issue 16's pacer
// took those spikes for the bottleneck's rate). An MPTCP socket: its bytes_acked (its TCP_INFO
// is one subflow's). The counter is 32 bits of segments: it wraps after ~6 TB per connection.
uint64_t bytes_delivered(int fd) noexcept;
// The lowest round trip TCP has seen on fd (TCP_INFO's tcpi_min_rtt; 0 where unavailable): the
// path's own, where the smoothed one also counts queues (a busy loopback's reached 4 ms).
uint32_t min_rtt_us(int fd) noexcept;
// Out-of-order packets TCP has received on fd so far (tcpi_rcv_ooopack, Linux 5.4; 0 where
// unavailable): a rise means a hole was open in the stream since the last look.
uint32_t out_of_order_packets(int fd) noexcept;

// Keeps a socket's SO_RCVLOWAT at the number of bytes the next read is owed (capped), so that
// TCP wakes a waiting reader once that many have arrived instead of once per segment: on a
// 1 Gbit/s link a 2 MiB MSG_WAITALL receive otherwise wakes its thread ~1,400 times.
// Only for reads the peer is bound to complete (the rest of a frame it has started), and
// only with reads that return once the mark is met: a MSG_WAITALL read that the kernel
// retries after a partial copy would wait for a mark above what is still owed, forever at
// the end of a stream. Small reads leave the mark at 1: they arrive in a segment or two.
class RecvLowWater {
public:
    explicit RecvLowWater(int fd) noexcept : fd_(fd) {}
    // owed: the bytes the next read may wait for (what the peer owes, or less where the
    // caller caps the mark). Returns true when a mark above 1 is set: read without
    // MSG_WAITALL, then call again.
    bool expect(size_t owed) noexcept;

private:
    int fd_;
    int current_ = 1;
};

// The address a peer should use to reach this host (first non-loopback IPv4), or 127.0.0.1.
std::string primary_address();
// The connected peer of fd as "192.0.2.7:40112" or "[2001:db8::7]:40112", for messages ("?"
// where it cannot be told).
std::string peer_address(int fd);

} // namespace sluice
