#pragma once
// The bytes of one data stream, read from its socket for a path that reads each frame itself
// (direct): first what the socket already holds (one non-blocking recv), then IORING_OP_RECV on
// the path's ring under a low-water mark for the rest (marked_wait.hpp); the ring's other
// completions (the path's writes) go to the path while it waits. Encrypted, the socket is
// read into the stream's record buffer and the records opened into the caller's memory.
#include <functional>
#include <optional>
#include <string>

#include "core/ring/ring.hpp"
#include "core/tls/keys.hpp"
#include "core/tls/record_reader.hpp"
#include "recv/paths/marked_wait.hpp"
#include "recv/paths/stream_receiver.hpp"

namespace sluice {

class StreamSocketReader {
public:
    // record_capacity: the record buffer's size when keys are given. ring is the path's: it
    // must outlive this reader's requests (declare the ring after the reader).
    StreamSocketReader(int sock, unsigned index, RecvContext& ctx, Ring& ring, std::function<void(Completion&)> other,
                       const tls::LinkKeys* keys, size_t record_capacity);

    // Exactly n plain bytes of the stream to p. spare: the byte at p + n may be overwritten
    // (RecordReader::read). Throws the stream's errors (cut short, silent, the socket's).
    void read(unsigned char* p, size_t n, bool spare = false);
    // Whether done is this reader's (the receive or its timeout): they keep their results.
    bool owns(const Completion& done) const { return &done == &recv_ || &done == &recv_timeout_; }
    // Encrypted and something is held that no frame has taken (a record after STREAM_END).
    bool holding() const { return records_ && records_->holding(); }

private:
    size_t take_queued(unsigned char* p, size_t n);
    size_t recv_between(unsigned char* p, size_t least, size_t most);

    int sock_;
    unsigned index_;
    RecvContext& ctx_;
    Ring& ring_;
    std::function<void(Completion&)> other_;
    MarkedWait wait_;
    std::optional<tls::RecordReader> records_; // encrypted: what the socket is read into
    Completion recv_, recv_timeout_;
};

} // namespace sluice
