#pragma once
// One client connection's state: a few hundred bytes, and no buffer while it is idle (its
// input buffer comes from the thread's pool while a request is being read or answered).
#include <cstdint>
#include <memory>
#include <string>

#include "core/ring/ring.hpp"
#include "serve/engine/file_cache.hpp"
#include "serve/engine/tls_conn.hpp"
#include "serve/engine/upload_file.hpp"

namespace sluice::serve {

inline constexpr uint16_t kNoBuf = 0xffff;

enum class Phase : uint8_t {
    idle,    // keep-alive, no byte of a next request yet: idle deadline
    reading, // part of a request head: request deadline
    body,    // an upload's body is arriving (then its commit): renewed on progress, bounded in all
    sending, // a response is being written: send deadline, renewed on progress
    closing, // shut down; freed once no request of its ring and no cold read names it
};

struct Conn {
    int fd = -1;
    uint32_t gen = 0; // bumped when the slot is freed: a late cold read for an old one is ignored
    Phase phase = Phase::idle;
    bool in_use = false;
    bool keep_alive = true;
    bool peer_done = false;   // the client shut its side: answer what is read, then close
    bool cold_pending = false; // a cold read names file_fd
    bool head_more = false;   // a body follows the head
    uint16_t buf = kNoBuf;    // index into the thread's input-buffer pool
    uint16_t client = 0xffff; // the thread's ClientTable entry (kNoClient: not tracked)
    uint32_t in_len = 0;      // bytes of input not yet parsed
    uint16_t out_off = 0, out_len = 0; // head bytes still to send (in the buffer's out area)
    bool corked = false;      // TCP_CORK set for a large body (full segments, as nginx's tcp_nopush)
    std::shared_ptr<const CachedFile> file; // the body's file, shared with the open-file cache
    int file_fd = -1;                       // file->fd while a body is owed
    uint64_t file_off = 0, file_end = 0;
    uint64_t checked_end = 0; // the body up to here was found in the page cache (cachestat)
    uint64_t ahead_end = 0;   // the pool was asked to read the body up to here (0: never cold)
    std::unique_ptr<std::string> body; // a listing, /_stats or an error text
    uint32_t body_off = 0;
    std::unique_ptr<UploadFile> up; // while an upload's body arrives and is committed
    std::unique_ptr<TlsConn> tls;   // HTTPS: from the accept to the close
    int status = 0;           // of the response in flight (counted when it is sent)
    int64_t deadline_ms = 0;
    Completion recv_c;
    Completion poll_c;
};

} // namespace sluice::serve
