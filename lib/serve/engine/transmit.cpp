// A response on the wire: the head with send (MSG_MORE while a body follows), a body in
// memory with send, a file with sendfile from the page cache. A full socket parks the
// connection on a POLLOUT; a range not in the page cache goes to the cold-read pool first.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "serve/engine/cold_reads.hpp"
#include "serve/engine/worker.hpp"

namespace sluice::serve {

namespace {

// Checked for residency, then sent, per piece: a piece not all cached goes to the pool.
constexpr uint64_t kPiece = 1 << 20;
// What the pool reads in at once: a cold large file costs one round trip per 4 MiB.
constexpr uint64_t kColdRead = 4 << 20;
// The most file bytes one connection sends per wake-up before it lets the others run. On a
// veth (or loopback) the receiver's side of a send runs on the sending CPU, so a socket whose
// client keeps up rarely fills: one large body's loop went on for many MiB per wake-up, and
// 100 keep-alive 1 KB clients beside 16 large transfers waited 80-180 ms for each answer, p99
// 157-442 ms (h15n, cold_mix.py --probe-rt). Past this, the connection waits for its POLLOUT
// again, which comes back behind what the ring already has. 256 KiB: p99 51-79 ms, nginx's
// 42-97 in the same calls; 2 MiB (nginx's sendfile_max_chunk) left it at 76-187 ms. The cost
// is the large bodies' CPU: 0.29 s/GB against 0.25 without turns, 0.27 at 2 MiB (nginx 0.30),
// paid only when a turn ends with other completions waiting (below).
constexpr uint64_t kTurn = 256 << 10;
// Bodies this large are sent corked: each sendfile that the socket cuts short would
// otherwise push out its partial last segment (TCP_NODELAY is on for small responses).
constexpr uint64_t kCorkAbove = 256 << 10;

} // namespace

void Worker::start(Conn& k, size_t head_len) {
    k.phase = Phase::sending;
    k.deadline_ms = now_ms_ + sh_.opt.send_timeout_ms;
    if (head_len == 0) return close_conn(k); // cannot happen with the heads we write; never send half of one
    if (k.file_fd >= 0 && k.file_end - k.file_off >= kCorkAbove) {
        int on = 1;
        k.corked = ::setsockopt(k.fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on) == 0;
    }
    if (k.tls) return tls_start(k, head_len);
    const bool more = k.body || (k.file_fd >= 0 && k.file_off < k.file_end);
    ssize_t n = ::send(k.fd, head_, head_len, MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0));
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) return close_conn(k);
        n = 0;
    }
    count_sent(k, static_cast<uint64_t>(n));
    if (static_cast<size_t>(n) < head_len) { // the rest waits in the connection's buffer
        if (k.buf == kNoBuf) k.buf = take_buf();
        std::memcpy(bufs_[k.buf]->out, head_ + n, head_len - static_cast<size_t>(n));
        k.out_off = 0;
        k.out_len = static_cast<uint16_t>(head_len - static_cast<size_t>(n));
        return park(k);
    }
    if (pump(k) == Pump::done) finish_response(k);
}

Worker::Pump Worker::pump(Conn& k) {
    if (k.tls) return tls_pump(k);
    auto send_some = [&](const char* p, size_t len, bool more) -> ssize_t {
        ssize_t n = ::send(k.fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
        return n;
    };
    const bool file_left = k.file_fd >= 0 && k.file_off < k.file_end;
    if (k.out_off < k.out_len) {
        ssize_t n = send_some(bufs_[k.buf]->out + k.out_off, k.out_len - k.out_off, k.body || file_left);
        if (n < 0) return close_conn(k), Pump::closed;
        k.out_off = static_cast<uint16_t>(k.out_off + n);
        count_sent(k, static_cast<uint64_t>(n));
        if (k.out_off < k.out_len) return park(k), Pump::parked;
        k.deadline_ms = now_ms_ + sh_.opt.send_timeout_ms;
    }
    if (k.body) {
        const std::string& b = *k.body;
        ssize_t n = send_some(b.data() + k.body_off, b.size() - k.body_off, false);
        if (n < 0) return close_conn(k), Pump::closed;
        k.body_off += static_cast<uint32_t>(n);
        count_sent(k, static_cast<uint64_t>(n));
        cnt_.add(cnt_.body_bytes, static_cast<uint64_t>(n));
        if (k.body_off < b.size()) return park(k), Pump::parked;
        k.body.reset();
        k.deadline_ms = now_ms_ + sh_.opt.send_timeout_ms;
    }
    uint64_t turn = 0; // file bytes sent in this wake-up
    while (k.file_fd >= 0 && k.file_off < k.file_end) {
        if (turn >= kTurn) {
            // Handed on only when another connection has something waiting: a large body
            // alone (or among large bodies whose sockets are full) keeps sending without a
            // poll round trip per turn, which cost it 14-18% more CPU per GB.
            if (ring_->completions_waiting()) return park(k), Pump::parked;
            turn = 0;
        }
        const uint64_t piece = std::min(kPiece, k.file_end - k.file_off);
        if (sh_.cold_check && k.file_off >= k.checked_end && await_cached(k) != Pump::done) return Pump::parked;
        const uint64_t want = std::min(piece, (k.checked_end > k.file_off ? k.checked_end : k.file_end) - k.file_off);
        off_t off = static_cast<off_t>(k.file_off);
        ssize_t n = ::sendfile(k.fd, k.file_fd, &off, static_cast<size_t>(want));
        if (n > 0) {
            k.file_off += static_cast<uint64_t>(n);
            turn += static_cast<uint64_t>(n);
            count_sent(k, static_cast<uint64_t>(n));
            cnt_.add(cnt_.body_bytes, static_cast<uint64_t>(n));
            k.deadline_ms = now_ms_ + sh_.opt.send_timeout_ms;
            // Short: the socket's buffer is full. Waiting for POLLOUT now saves the sendfile
            // that would only say EAGAIN (nginx does the same).
            if (static_cast<uint64_t>(n) < want && k.file_off < k.file_end) return park(k), Pump::parked;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return park(k), Pump::parked;
        // 0: the file shrank under us. The head promised more bytes than exist: the client
        // must see a short response (closed), never a silently different length.
        return close_conn(k), Pump::closed;
    }
    return Pump::done;
}

// One cachestat per piece, not per sendfile (or sealed record): a piece found cached is sent
// over as many wake-ups as the socket needs without asking again. done: [file_off,
// checked_end) is cached; parked: the pool reads it (or waits for a read of it) and wakes us.
Worker::Pump Worker::await_cached(Conn& k) {
    const uint64_t piece = std::min(kPiece, k.file_end - k.file_off);
    const bool cached = range_cached(k.file_fd, k.file_off, piece);
    // Asked after cachestat, never before: a page it counted that a pool read is still
    // filling belongs to a read registered before that page existed (cold_reads.hpp).
    const FileKey key{static_cast<uint64_t>(k.file->st.st_dev), static_cast<uint64_t>(k.file->st.st_ino)};
    if (sh_.cold->reading_joined(key, k.file_off, piece, &wake_, index_of(k), k.gen)) {
        k.cold_pending = true;
        cnt_.add(cnt_.cold_waits);
        return Pump::parked;
    }
    if (!cached) {
        k.cold_pending = true;
        ColdJob job{k.file_fd, k.file_off, std::min(kColdRead, k.file_end - k.file_off), &wake_, index_of(k), k.gen,
                    nullptr, key, 0, nullptr};
        k.ahead_end = k.file_off + job.length;
        sh_.cold->submit(std::move(job));
        cnt_.add(cnt_.cold_reads);
        read_ahead(k, key);
        return Pump::parked;
    }
    k.checked_end = k.file_off + piece;
    // Sending what the pool read in: the next range is being read meanwhile.
    if (k.ahead_end && k.file_off + kColdRead >= k.ahead_end) read_ahead(k, key);
    return Pump::done;
}

void Worker::read_ahead(Conn& k, const FileKey& key) {
    if (k.ahead_end >= k.file_end) return;
    const uint64_t len = std::min(kColdRead, k.file_end - k.ahead_end);
    if (!range_cached(k.file_fd, k.ahead_end, len)) {
        // Nobody waits for it; it holds the file open itself, the connection may go first.
        sh_.cold->read_ahead(ColdJob{k.file_fd, k.ahead_end, len, nullptr, 0, 0, nullptr, key, 0, k.file});
    }
    k.ahead_end += len;
}

void Worker::finish_response(Conn& k) {
    const int cls = k.status / 100;
    if (cls >= 2 && cls <= 5) cnt_.add(cnt_.status_class[cls]);
    if (k.corked) { // sends the last partial segment now
        int off = 0;
        ::setsockopt(k.fd, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
        k.corked = false;
    }
    k.file.reset();
    k.file_fd = -1;
    k.checked_end = k.ahead_end = 0;
    k.body.reset();
    k.out_off = k.out_len = 0;
    k.phase = Phase::idle;
    k.deadline_ms = now_ms_ + sh_.opt.idle_timeout_ms;
    if (!k.keep_alive) close_conn(k);
}

void Worker::park(Conn& k) { ring_->poll(k.poll_c, k.fd, POLLOUT); }

} // namespace sluice::serve
