#include "send/paths/cold_block_sender.hpp"

#include <sys/socket.h>

#include <cerrno>

#include "core/checksum/xxh3.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

namespace {
constexpr size_t kPrefix = wire::kFrameHeaderBytes + wire::kBlockPrefixBytes;
static_assert(kPrefix <= DirectBlockReader::kHead, "the frame's prefix goes in the room before the block");
} // namespace

ColdBlockSender::ColdBlockSender(int sock, int idle_timeout_ms) : sock_(sock), idle_timeout_ms_(idle_timeout_ms) {
    ring_sends_ = reader_.ring() && probe_ring_features().op_send;
}

ColdBlockSender::~ColdBlockSender() {
    reader_.stop(); // a send still in flight (an error unwinding) is cancelled before send_ and its buffer go
    if (sending_file_) sending_file_->let_go();
}

bool ColdBlockSender::try_send(const Segment& seg, bool more, const Segment* next) {
    if (!reader_.read(seg, next)) {
        drain(); // the caller writes to the socket next
        return false;
    }
    const SourceFile& f = *seg.file;
    unsigned char* data = reader_.data();
    unsigned char* frame = data - kPrefix;
    wire::BlockPrefix p;
    p.file_id = f.file_id;
    p.offset = seg.offset;
    p.checksum = xxh3_64(data, seg.length);
    wire::encode_block_prefix(frame, p, static_cast<uint32_t>(seg.length));
    drain(); // the block before, from another buffer
    f.hold();
    sending_file_ = &f;
    reader_.lend();
    send(frame, kPrefix + seg.length, more);
    return true;
}

void ColdBlockSender::send(unsigned char* at, size_t length, bool more) {
    sending_ = at;
    sending_len_ = length;
    sending_flags_ = MSG_NOSIGNAL | (more ? MSG_MORE : 0);
    if (ring_sends_) {
        reader_.ring()->send(send_, sock_, at, length, sending_flags_ | MSG_WAITALL);
        reader_.ring()->submit();
        return;
    }
    drain(); // no ring: sent here, on this thread
}

void ColdBlockSender::drain() {
    if (!sending_) return;
    size_t done = 0;
    int err = 0;
    bool timed_out = false;
    if (ring_sends_) {
        Ring& ring = *reader_.ring();
        // Its completion may already be in (reaped while waiting for a read ahead). Bounded as
        // the stream's other sends are: a receiver still taking data is slow, one that took
        // nothing for the idle timeout has stopped.
        while (send_.busy()) {
            const uint64_t acked = bytes_acked(sock_);
            if (ring.wait_for(idle_timeout_ms_)) continue; // the send's, or the read ahead's
            if (bytes_acked(sock_) != acked) continue;
            ::shutdown(sock_, SHUT_RDWR); // ends the send, which then fails like a lost connection
            while (send_.busy()) ring.wait();
            timed_out = true;
        }
        if (!timed_out && send_.outcome() == Completion::Outcome::failed) err = send_.error();
        if (send_.outcome() == Completion::Outcome::ok) done = static_cast<size_t>(send_.result());
    }
    // What the ring did not send (a short send, or none queued): on this thread, where a
    // blocking send is bounded by SO_SNDTIMEO.
    while (!timed_out && !err && done < sending_len_) {
        const ssize_t n = ::send(sock_, sending_ + done, sending_len_ - done, sending_flags_);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) err = errno;
        else done += static_cast<size_t>(n);
    }
    // Out or failed: the frame no longer needs its buffer, nor its file's record.
    const SourceFile& f = *sending_file_;
    sending_ = nullptr;
    sending_file_ = nullptr;
    reader_.give_back();
    if (!timed_out && !err) {
        f.let_go();
        return;
    }
    const std::string what = "data stream lost while sending '" + f.rel + "'";
    f.let_go();
    if (timed_out)
        throw Error(ErrorCode::network, what + ": the receiver took nothing (timed out after " + timeout_text(idle_timeout_ms_) + ")",
                    ErrorCause::timed_out);
    throw_send_errno(what, err);
}

} // namespace sluice
