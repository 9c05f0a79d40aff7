// Uploads: a PUT or POST with a Content-Length or a chunked body (curl -T - from a pipe), its
// body written as it arrives into a temporary file beneath DIR (upload_file.cpp) and renamed
// into place when the last byte (the last chunk and its trailers) is in; with --sync the
// fsyncs run on the pool and the answer waits for them. A refused upload is answered and the
// connection closed: its body, if the client sends it anyway, is never read as a request.
#include <sys/socket.h>

#include <algorithm>

#include "serve/engine/cold_reads.hpp"
#include "serve/engine/worker.hpp"

namespace sluice::serve {

namespace {

const char* upload_error_text(int status) {
    switch (status) {
    case 400: return "malformed chunked body";
    case 403: return "forbidden (a symlink or a file on the way, outside the directory, or a reserved name)";
    case 404: return "not found";
    case 409: return "conflict: a directory has that name";
    case 413: return "body larger than the server's upload limit";
    case 507: return "insufficient storage";
    default: return "cannot store the file";
    }
}

} // namespace

void Worker::begin_upload(Conn& k, const http::Request& req, const http::Target& t) {
    auto refuse = [&](int status, std::string_view why) {
        cnt_.add(cnt_.uploads_failed);
        respond_simple(k, status, false, why);
    };
    if (!req.has_length && !req.chunked) return refuse(411, "uploads need a Content-Length or a chunked body");
    if (req.expect_other) return refuse(417, "only Expect: 100-continue is understood");
    if (req.content_length > sh_.opt.max_upload_bytes) return refuse(413, "body larger than the server's upload limit");
    if (t.rel.empty() || t.trailing_slash) return refuse(400, "an upload needs a file name, not a directory");
    if (t.rel == "_stats") return refuse(403, "_stats is not a file");
    if (sh_.uploads_open.load(std::memory_order_relaxed) >= sh_.opt.max_uploads)
        return refuse(503, "too many uploads at once; try again later");
    int status = 0;
    k.up = UploadFile::open(sh_.root.get(), t.rel, req.content_length, index_, &sh_.uploads_open, &status);
    if (!k.up) return refuse(status, upload_error_text(status));
    if (req.chunked) { // its length is known at the last chunk: owed until then
        k.up->is_chunked = true;
        k.up->left = 1;
    }
    k.up->total_deadline_ms = now_ms_ + sh_.opt.upload_timeout_ms;
    k.keep_alive = req.keep_alive && !draining_ && !k.peer_done;
    k.phase = Phase::body;
    k.deadline_ms = std::min(now_ms_ + sh_.opt.request_timeout_ms, k.up->total_deadline_ms);
    if (req.expect_continue) {
        // The client waits for this before sending the body. A socket that takes nothing now
        // only delays it: curl and others send the body anyway after their own wait.
        static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (k.tls) {
            tls_send_small(k, kContinue, sizeof kContinue - 1);
            if (k.phase == Phase::closing) return;
        } else {
            ssize_t n = ::send(k.fd, kContinue, sizeof kContinue - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) count_sent(k, static_cast<uint64_t>(n));
        }
    }
    if (k.up->left == 0) finish_upload(k);
}

size_t Worker::take_body(Conn& k, const char* data, size_t len) {
    UploadFile& u = *k.up;
    if (u.left == 0) return 0; // whole, being committed: what follows waits for the answer
    if (u.is_chunked) return take_chunks(k, data, len);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, u.left));
    if (n == 0) return 0;
    if (int status = u.write(data, n)) {
        fail_upload(k, status);
        return n;
    }
    u.left -= n;
    cnt_.add(cnt_.upload_bytes, n);
    // A body must keep coming (request timeout without a byte) and end in time (upload timeout).
    k.deadline_ms = std::min(now_ms_ + sh_.opt.request_timeout_ms, u.total_deadline_ms);
    if (u.left == 0) finish_upload(k);
    return n;
}

size_t Worker::take_chunks(Conn& k, const char* data, size_t len) {
    UploadFile& u = *k.up;
    size_t used = 0;
    while (used < len) {
        const http::ChunkedDecoder::Step st = u.chunks.feed(data + used, len - used);
        if (st.error) {
            fail_upload(k, st.error);
            return len; // what follows a broken frame is never read as a request
        }
        // Refused when a chunk's size line says it would pass the limit, before its data.
        if (u.chunks.promised() > sh_.opt.max_upload_bytes) {
            fail_upload(k, 413);
            return len;
        }
        if (st.data_len) {
            if (int status = u.write(data + used + st.data_off, st.data_len)) {
                fail_upload(k, status);
                return len;
            }
            cnt_.add(cnt_.upload_bytes, st.data_len);
        }
        used += st.used;
        if (st.done) {
            u.left = 0;
            break;
        }
    }
    // Framing or data: either is progress within the upload's overall deadline, which bounds
    // a client that trickles a byte at a time (the decoder bounds framing against data).
    k.deadline_ms = std::min(now_ms_ + sh_.opt.request_timeout_ms, u.total_deadline_ms);
    if (u.left == 0) finish_upload(k);
    return used;
}

void Worker::fail_upload(Conn& k, int status) {
    k.up.reset(); // removes the temporary file
    cnt_.add(cnt_.uploads_failed);
    respond_simple(k, status, false, upload_error_text(status));
}

void Worker::finish_upload(Conn& k) {
    if (sh_.opt.sync_uploads && sh_.opt.cold_read_threads > 0 && sh_.cold) {
        // fsync waits for the disk: on the pool, so this thread serves everyone else meanwhile.
        k.up->committing = true;
        k.cold_pending = true;
        ColdJob job{-1, 0, 0, &wake_, index_of(k), k.gen, k.up.get(), {}, 0, nullptr};
        sh_.cold->submit(std::move(job));
        return;
    }
    k.up->commit_status = k.up->commit(sh_.opt.sync_uploads);
    upload_done(k);
}

void Worker::upload_done(Conn& k) {
    std::unique_ptr<UploadFile> u = std::move(k.up);
    if (const int status = u->commit_status) {
        u.reset(); // the temporary file goes before the answer: a client that has it never sees the file
        cnt_.add(cnt_.uploads_failed);
        return respond_simple(k, status, false, upload_error_text(status));
    }
    cnt_.add(cnt_.uploads);
    sh_.upload_gen.fetch_add(1, std::memory_order_relaxed);
    respond_simple(k, u->created ? 201 : 200, k.keep_alive && !k.peer_done, u->created ? "created" : "replaced");
}

} // namespace sluice::serve
