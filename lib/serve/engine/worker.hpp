#pragma once
// One ring thread of the server: its own io_uring, listening socket and connections.
//   accept (multishot where the kernel has it) -> recv (multishot into provided buffers, or
//   one recv per read into the connection's buffer) -> parse -> answer -> send the head,
//   sendfile the body; a full socket parks the connection on a POLLOUT, a range not in the
//   page cache goes to the cold-read pool. Every connection has a deadline, checked each tick.
#include <memory>
#include <string_view>
#include <vector>

#include "core/ring/provided_buffers.hpp"
#include "core/ring/ring.hpp"
#include "serve/engine/clients.hpp"
#include "serve/engine/cold_reads.hpp"
#include "serve/engine/conn.hpp"
#include "serve/engine/shared.hpp"
#include "serve/http/request.hpp"
#include "serve/http/target.hpp"
#include "sluice/error.hpp"

namespace sluice::serve {

// A connection's input and the part of a head the socket did not take at once.
struct IoBuf {
    static constexpr size_t kIn = 2 * http::kMaxHeadBytes; // a head, and pipelined requests behind it
    static constexpr size_t kOut = 1024;
    char in[kIn];
    char out[kOut];
};

class Worker {
public:
    Worker(Shared& shared, unsigned index, UniqueFd listen_fd);
    ~Worker();
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;
    void run(); // until stopped and drained

private:
    enum class Pump : uint8_t { done, parked, closed };

    // worker.cpp: the loop, accepting, receiving, parsing
    // conn_life.cpp: wake-ups from the pool, deadlines, the drain, closing, buffers
    void dispatch(Completion& c);
    void arm_accept();
    void on_accept(Completion& c);
    void arm_recv(Conn& k);
    void on_recv(Conn& k, Completion& c);
    bool append_input(Conn& k, const char* data, size_t len);
    bool take_input(Conn& k, const char* data, size_t len); // plain bytes: an upload's body, or input
    void serve_input(Conn& k);
    void settle(Conn& k); // after input or a response: idle, reading, or closed
    void resume(Conn& k); // a response is done: the next pipelined request, or wait
    void resume_input(Conn& k); // ... the same once the response's end is already handled
    void on_wake();
    void note_path(std::string& field, const char* text); // a slower path found at run time
    void tick();
    void begin_drain();
    void close_conn(Conn& k);
    void maybe_free(Conn& k);
    uint16_t take_buf();
    void count_sent(Conn& k, uint64_t n) { // heads and bodies, per thread and per client
        cnt_.add(cnt_.bytes, n);
        clients_.sent(k.client, n);
    }
    void release_buf(Conn& k);
    uint32_t index_of(const Conn& k) const { return static_cast<uint32_t>(&k - conns_.get()); }

    // respond.cpp: one parsed request -> a response begun
    void handle(Conn& k, const http::Request& req);
    void respond_simple(Conn& k, int status, bool keep_alive, std::string_view text, bool www_auth = false);
    void respond_body(Conn& k, int status, bool keep_alive, std::string_view type, std::unique_ptr<std::string> body,
                      bool head_only);
    std::string_view date();

    // upload.cpp: PUT and POST bodies into a file beneath DIR
    void begin_upload(Conn& k, const http::Request& req, const http::Target& t);
    size_t take_body(Conn& k, const char* data, size_t len); // bytes of the body among them
    size_t take_chunks(Conn& k, const char* data, size_t len); // ... of a chunked body, framing too
    void fail_upload(Conn& k, int status);
    void finish_upload(Conn& k);
    void upload_done(Conn& k); // the commit ended (inline or on the pool): the answer

    // transmit.cpp: the response on the wire
    void start(Conn& k, size_t head_len);
    Pump pump(Conn& k);
    void finish_response(Conn& k);
    void park(Conn& k);
    void read_ahead(Conn& k, const FileKey& key); // the next range of a cold body, to the pool
    Pump await_cached(Conn& k); // the body's next piece checked for the page cache, or sent to the pool

    // tls_io.cpp: HTTPS, the handshake and the records received (tls_conn.hpp)
    void tls_received(Conn& k, const unsigned char* data, size_t len); // data null: already in rx
    void tls_shake(Conn& k); // a step of the handshake, then its output sent
    void tls_records(Conn& k); // the complete records in rx opened, their content taken
    void tls_bad_record(Conn& k, const Error& e);
    // tls_transmit.cpp: a response sealed into records and sent
    void tls_start(Conn& k, size_t head_len);
    Pump tls_pump(Conn& k);
    Pump tls_fill(Conn& k);
    // A few bytes (100 Continue) as one record with nothing else in flight, best effort: a
    // socket that takes none of it leaves the connection as it was (the sequence number is
    // taken only once the record went); one that takes part of it breaks TLS: closed.
    void tls_send_small(Conn& k, const char* p, size_t n);
    uint16_t take_tls_out();
    void release_tls_out(Conn& k);

    Shared& sh_;
    unsigned index_;
    Counters& cnt_;
    WakeQueue& wake_;
    UniqueFd listen_;
    const unsigned max_conns_;
    std::unique_ptr<Conn[]> conns_;
    std::vector<uint32_t> free_conns_;
    std::vector<std::unique_ptr<IoBuf>> bufs_;
    std::vector<uint16_t> free_bufs_;
    std::vector<std::unique_ptr<TlsOut>> tls_outs_; // HTTPS: lent while a response is sealed and sent
    std::vector<uint16_t> free_tls_outs_;
    std::vector<ColdDone> cold_done_;
    FileCache files_;
    ClientTable clients_;
    http::Target target_;
    char head_[IoBuf::kOut];
    char date_[32] = {};
    int64_t date_sec_ = -1;
    int64_t now_ms_ = 0;
    int64_t next_tick_ms_ = 0;
    int64_t drain_deadline_ms_ = 0;
    uint32_t sweep_at_ = 0; // the next slot tick() looks at for deadlines
    bool draining_ = false;
    bool accept_multishot_ = false;
    bool accept_retry_ = false; // the last accept failed (EMFILE...): re-armed at the next tick
    bool provided_recv_ = false; // receives pick provided buffers (else the connection holds one)
    bool recv_ms_ = true;         // ... with one multishot recv per connection (else one per read)
    uint64_t wake_value_ = 0;
    // Declared after everything its requests point into: it goes first.
    std::unique_ptr<Ring> ring_;
    std::unique_ptr<ProvidedBuffers> provided_;
    Completion accept_c_;
    Completion wake_c_;
};

int64_t monotonic_ms();

} // namespace sluice::serve
