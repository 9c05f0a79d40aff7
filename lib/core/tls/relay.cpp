#include "core/tls/relay.hpp"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/tls/record.hpp"

namespace sluice::tls {

namespace {
// 16 records per system call each way: 262 KiB, like a socket buffer's worth, so a relay
// thread wakes once per buffer, not once per record.
constexpr size_t kSlots = 16;
} // namespace

Relay::Relay(UniqueFd tcp, const LinkKeys& keys, std::string what, std::function<void(const Error&)> on_fail)
    : tcp_(std::move(tcp)), keys_(keys), what_(std::move(what)), on_fail_(std::move(on_fail)) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw_errno(ErrorCode::internal, "socketpair");
    plain_.reset(sv[0]);
    mine_.reset(sv[1]);
    out_ = std::thread([this] { outbound(); });
    in_ = std::thread([this] { inbound(); });
}

Relay::~Relay() {
    // Reads on our end return what the session wrote, then end of file: the outbound thread
    // sends it all and closes its direction of the connection.
    ::shutdown(mine_.get(), SHUT_RD);
    out_.join();
    ::shutdown(tcp_.get(), SHUT_RDWR);
    in_.join();
}

void Relay::failed(const Error& e) {
    if (on_fail_) on_fail_(e);
    ::shutdown(mine_.get(), SHUT_RDWR);
    ::shutdown(tcp_.get(), SHUT_RDWR);
}

void Relay::outbound() {
    std::unique_ptr<unsigned char[]> buf(new unsigned char[kSlots * kMaxRecord]);
    try {
        Sealer sealer(keys_.tx);
        std::array<iovec, kSlots> iov{};
        for (size_t i = 0; i < kSlots; ++i) iov[i] = {buf.get() + i * kMaxRecord + kHeaderBytes, kMaxPlain};
        for (;;) {
            ssize_t n = ::readv(mine_.get(), iov.data(), kSlots);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n <= 0) break; // the session closed its end (or shut it down after a failure)
            size_t left = static_cast<size_t>(n), wire = 0;
            for (size_t i = 0; left > 0; ++i) {
                size_t plain = std::min(left, kMaxPlain);
                wire += sealer.seal(buf.get() + i * kMaxRecord, plain);
                left -= plain;
            }
            send_all(tcp_.get(), std::span(buf.get(), wire), what_.c_str());
        }
        ::shutdown(tcp_.get(), SHUT_WR);
    } catch (const Error& e) {
        // A reset while sending: the peer may have said why in a record still queued for us
        // (in TLS 1.3 a server refuses a client's certificate after the client's handshake
        // ended: its alert is the first record). The inbound side reads it and reports what
        // it finds; the session's writes fail meanwhile.
        if (e.cause() == ErrorCause::peer_reset) {
            ::shutdown(mine_.get(), SHUT_RD);
            return;
        }
        failed(e);
    }
}

void Relay::inbound() {
    const size_t cap = kSlots * kMaxRecord;
    std::unique_ptr<unsigned char[]> buf(new unsigned char[cap]);
    try {
        Opener opener(keys_.rx, what_.c_str());
        std::vector<iovec> iov;
        iov.reserve(kSlots + 1);
        size_t have = 0;
        for (;;) {
            ssize_t n = ::recv(tcp_.get(), buf.get() + have, cap - have, 0);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue; // the session judges silence
            if (n < 0 && (errno == ECONNRESET || errno == EPIPE))
                throw Error(ErrorCode::network, "the peer reset " + what_, ErrorCause::peer_reset);
            if (n < 0) throw_errno(ErrorCode::network, what_.c_str());
            if (n == 0) {
                if (have > 0)
                    throw Error(ErrorCode::network, "the peer closed " + what_ + " in the middle of a TLS record",
                                ErrorCause::peer_closed);
                break;
            }
            have += static_cast<size_t>(n);
            size_t off = 0;
            iov.clear();
            while (have - off >= kHeaderBytes) {
                size_t size = opener.record_size(buf.get() + off);
                if (have - off < size) break;
                size_t len = opener.open(buf.get() + off, size);
                if (len) iov.push_back({buf.get() + off + kHeaderBytes, len});
                off += size;
            }
            for (size_t i = 0; i < iov.size();) {
                msghdr m{};
                m.msg_iov = iov.data() + i;
                m.msg_iovlen = std::min(iov.size() - i, size_t(IOV_MAX));
                ssize_t w = ::sendmsg(mine_.get(), &m, MSG_NOSIGNAL); // a closed session end is EPIPE, not SIGPIPE
                if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
                if (w < 0) {
                    ::shutdown(tcp_.get(), SHUT_RDWR); // the session is gone: nothing to deliver to
                    return;
                }
                for (size_t k = static_cast<size_t>(w); k > 0 && i < iov.size();) {
                    size_t take = std::min(k, iov[i].iov_len);
                    iov[i].iov_base = static_cast<unsigned char*>(iov[i].iov_base) + take;
                    iov[i].iov_len -= take;
                    k -= take;
                    if (iov[i].iov_len == 0) ++i;
                }
            }
            std::memmove(buf.get(), buf.get() + off, have - off);
            have -= off;
        }
        ::shutdown(mine_.get(), SHUT_WR);
    } catch (const Error& e) {
        failed(e);
    }
}

} // namespace sluice::tls
