// An HTTPS response on the wire (serve --cert/--key): the head, a body in memory and the
// file's range are read into the record slots of a TlsOut the worker lends (the file with one
// preadv per batch, from the page cache: a range not in it goes to the cold-read pool first,
// as for sendfile), sealed in place by the record engine, and sent with one non-blocking
// sendmsg; a full socket parks the connection on POLLOUT. A small response is one record:
// head and body together. Nothing is allocated per record or per response.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/io/preadv_full.hpp"
#include "serve/engine/worker.hpp"

namespace sluice::serve {

void Worker::tls_start(Conn& k, size_t head_len) {
    // The head is sealed with the body's first bytes: it waits in the connection's buffer.
    if (k.buf == kNoBuf) k.buf = take_buf();
    std::memcpy(bufs_[k.buf]->out, head_, head_len);
    k.out_off = 0;
    k.out_len = static_cast<uint16_t>(head_len);
    if (tls_pump(k) == Pump::done) finish_response(k);
}

Worker::Pump Worker::tls_pump(Conn& k) {
    TlsConn& t = *k.tls;
    for (;;) {
        while (t.out_left > 0) {
            msghdr m{};
            m.msg_iov = t.iov + t.iov_at;
            m.msg_iovlen = t.iov_n - t.iov_at;
            const ssize_t n = ::sendmsg(k.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) return park(k), Pump::parked;
            if (n <= 0) return close_conn(k), Pump::closed;
            count_sent(k, static_cast<uint64_t>(n));
            k.deadline_ms = now_ms_ + sh_.opt.send_timeout_ms;
            t.out_left -= static_cast<size_t>(n);
            for (size_t left = static_cast<size_t>(n); left > 0;) {
                iovec& v = t.iov[t.iov_at];
                const size_t d = std::min(left, v.iov_len);
                v.iov_base = static_cast<unsigned char*>(v.iov_base) + d;
                v.iov_len -= d;
                left -= d;
                if (v.iov_len == 0) ++t.iov_at;
            }
            // Short: the socket's buffer is full; POLLOUT says when it has room.
            if (t.out_left > 0) return park(k), Pump::parked;
        }
        const bool more = k.out_off < k.out_len || k.body || (k.file_fd >= 0 && k.file_off < k.file_end);
        if (!more) {
            release_tls_out(k);
            return Pump::done;
        }
        if (Pump p = tls_fill(k); p != Pump::done) return p;
    }
}

// Fills up to kTlsOutRecords records with what is owed, in order (head, body, file), and
// seals them. Called with nothing sealed left to send.
Worker::Pump Worker::tls_fill(Conn& k) {
    TlsConn& t = *k.tls;
    static_assert(kTlsOutRecords <= kPreadvFullMax);
    const bool file_left = k.file_fd >= 0 && k.file_off < k.file_end;
    if (file_left && sh_.cold_check && k.file_off >= k.checked_end && await_cached(k) != Pump::done)
        return Pump::parked;
    if (t.out == kNoBuf) t.out = take_tls_out();
    TlsOut& o = *tls_outs_[t.out];
    const uint64_t limit = !file_left ? 0 : sh_.cold_check ? k.checked_end : k.file_end;
    uint64_t plan = k.file_off;
    iovec file_iov[kTlsOutRecords];
    size_t file_n = 0, plain[kTlsOutRecords], recs = 0;
    uint64_t body = 0;
    while (recs < kTlsOutRecords) {
        unsigned char* c = o.slot[recs] + tls::kHeaderBytes;
        size_t used = 0;
        if (k.out_off < k.out_len) {
            const size_t take = std::min<size_t>(tls::kMaxPlain, k.out_len - k.out_off);
            std::memcpy(c, bufs_[k.buf]->out + k.out_off, take);
            k.out_off = static_cast<uint16_t>(k.out_off + take);
            used += take;
        }
        if (k.body && used < tls::kMaxPlain) {
            const size_t take = std::min<size_t>(tls::kMaxPlain - used, k.body->size() - k.body_off);
            std::memcpy(c + used, k.body->data() + k.body_off, take);
            k.body_off += static_cast<uint32_t>(take);
            used += take;
            body += take;
            if (k.body_off == k.body->size()) k.body.reset();
        }
        if (plan < limit && used < tls::kMaxPlain) {
            const size_t take = static_cast<size_t>(std::min<uint64_t>(tls::kMaxPlain - used, limit - plan));
            file_iov[file_n++] = {c + used, take};
            plan += take;
            used += take;
        }
        if (used == 0) break;
        plain[recs++] = used;
        if (k.out_off == k.out_len && !k.body && plan >= limit) break; // the rest (if any) is not known cached
    }
    // The file's part of the batch: one preadv (more if the kernel returns short).
    const uint64_t total = plan - k.file_off;
    // EIO: the file shrank under us. The head promised more bytes than exist: the client must
    // see a short response (closed), never a silently different length.
    if (file_n > 0 && preadv_full(k.file_fd, file_iov, file_n, static_cast<off_t>(k.file_off)) != 0)
        return close_conn(k), Pump::closed;
    k.file_off = plan;
    body += total;
    t.iov_at = 0;
    t.iov_n = static_cast<uint8_t>(recs);
    for (size_t i = 0; i < recs; ++i) {
        const size_t size = t.sealer->seal(o.slot[i], plain[i]);
        t.iov[i] = {o.slot[i], size};
        t.out_left += size;
    }
    cnt_.add(cnt_.body_bytes, body);
    return Pump::done;
}

void Worker::tls_send_small(Conn& k, const char* p, size_t n) {
    TlsConn& t = *k.tls;
    unsigned char rec[tls::kRecordOverhead + 64];
    if (n > 64 || t.out_left > 0) return;
    std::memcpy(rec + tls::kHeaderBytes, p, n);
    const size_t size = t.sealer->seal_at(rec, n, t.sealer->sequence());
    ssize_t w;
    do {
        w = ::send(k.fd, rec, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    if (w <= 0) return;
    count_sent(k, static_cast<uint64_t>(w));
    if (static_cast<size_t>(w) < size) return close_conn(k);
    t.sealer->take(1);
}

uint16_t Worker::take_tls_out() {
    if (free_tls_outs_.empty()) {
        // Not value-initialized: a small response touches one record's pages of it, never all.
        tls_outs_.push_back(std::unique_ptr<TlsOut>(new TlsOut));
        return static_cast<uint16_t>(tls_outs_.size() - 1);
    }
    const uint16_t b = free_tls_outs_.back();
    free_tls_outs_.pop_back();
    return b;
}

void Worker::release_tls_out(Conn& k) {
    if (!k.tls || k.tls->out == kNoBuf) return;
    free_tls_outs_.push_back(k.tls->out);
    k.tls->out = kNoBuf;
    k.tls->out_left = 0;
}

} // namespace sluice::serve
