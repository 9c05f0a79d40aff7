#include "recv/session/acceptor.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <vector>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/stats/process_usage.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

namespace {

constexpr size_t kMaxPendingHandshakes = 256;
constexpr int kHandshakeDeadlineMs = 10000;

} // namespace

struct Acceptor::Pending {
    UniqueFd fd;
    std::array<unsigned char, wire::kNonceBytes> nonce{};
    std::array<unsigned char, wire::kClientHelloBytes> hello{};
    size_t got = 0;
    Clock::time_point deadline;
};

Acceptor::Acceptor(const RecvOptions& opts, SessionLog& log)
    : idle_timeout_ms_(opts.idle_timeout_ms), log_(log), token_(opts.token.empty() ? wire::random_token() : opts.token) {
    listener_ = listen_tcp(opts.bind_address, opts.port);
    port_ = local_port(listener_.get());
    // The accept loop drains bursts of connections and must never block on accept.
    set_nonblocking(listener_.get(), true);
    wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) throw_errno(ErrorCode::internal, "eventfd");
}

void Acceptor::wake() noexcept {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

void Acceptor::run(Admission& admission) {
    std::deque<Pending> pending;
    while (admission.accepting()) {
        std::vector<pollfd> pfds;
        pfds.push_back({wake_.get(), POLLIN, 0});
        pfds.push_back({listener_.get(), POLLIN, 0});
        for (auto& p : pending) pfds.push_back({p.fd.get(), POLLIN, 0});
        int timeout = -1;
        auto now = Clock::now();
        for (auto& p : pending) {
            int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(p.deadline - now).count());
            timeout = timeout < 0 ? std::max(ms, 0) : std::min(timeout, std::max(ms, 0));
        }
        const int cap = admission.max_wait_ms();
        if (cap >= 0 && (timeout < 0 || timeout > cap)) timeout = cap;
        int rc = ::poll(pfds.data(), pfds.size(), timeout);
        if (rc < 0 && errno != EINTR) throw_errno(ErrorCode::internal, "poll");
        if (pfds[0].revents) {
            uint64_t v;
            [[maybe_unused]] ssize_t n = ::read(wake_.get(), &v, sizeof v);
        }
        // Progress on pending handshakes first (their indices match pfds[2...]).
        now = Clock::now();
        for (size_t i = 0; i < pending.size();) {
            short re = pfds.size() > i + 2 ? pfds[i + 2].revents : 0;
            bool drop = now >= pending[i].deadline;
            if (!drop && re) drop = !advance_handshake(admission, pending[i]);
            if (drop) {
                pending.erase(pending.begin() + static_cast<long>(i));
                pfds.erase(pfds.begin() + static_cast<long>(i) + 2);
            } else {
                ++i;
            }
        }
        if (pfds[1].revents & POLLIN) accept_new(pending);
        admission.after_round();
    }
}

void Acceptor::accept_new(std::deque<Pending>& pending) {
    for (int burst = 0; burst < 64; ++burst) {
        int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        Pending p{.fd = UniqueFd(fd), .deadline = Clock::now() + std::chrono::milliseconds(kHandshakeDeadlineMs)};
        wire::random_bytes(p.nonce);
        wire::Bytes out;
        wire::encode_server_hello(out, wire::ServerHello{.nonce = p.nonce});
        if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) continue;
        // Bounded: a flood of silent connections evicts the oldest, never exhausts fds.
        if (pending.size() >= kMaxPendingHandshakes) pending.pop_front();
        pending.push_back(std::move(p));
    }
}

// Returns false when the connection is finished with (handed over or refused).
bool Acceptor::advance_handshake(Admission& admission, Pending& p) {
    ssize_t n = ::recv(p.fd.get(), p.hello.data() + p.got, p.hello.size() - p.got, 0);
    if (n <= 0) return n < 0 && (errno == EAGAIN || errno == EINTR);
    p.got += static_cast<size_t>(n);
    if (p.got < p.hello.size()) return true;
    wire::ClientHello h;
    try {
        h = wire::decode_client_hello(p.hello);
    } catch (const Error& e) {
        log_.verbose_line(std::string("refused a connection: ") + e.what());
        return false;
    }
    if (h.version != wire::kVersion) return refuse(p, wire::AuthStatus::bad_version);
    auto expected = wire::client_hello_mac(token_, p.nonce, wire::client_hello_signed_part(p.hello));
    if (!wire::macs_equal(expected, h.mac)) {
        log_.line("warning: refused a connection: wrong token");
        return refuse(p, wire::AuthStatus::bad_token);
    }
    // Admission and joining happen on this thread only, so nothing can change in between.
    if (auto status = admission.admit(h); status != wire::AuthStatus::ok) return refuse(p, status);
    if (accept_stream(p, h)) admission.join(h, std::move(p.fd));
    return false;
}

bool Acceptor::refuse(Pending& p, wire::AuthStatus why) {
    wire::Bytes out;
    wire::encode_server_auth(out, wire::ServerAuth{.status = why});
    [[maybe_unused]] ssize_t n = ::send(p.fd.get(), out.data(), out.size(), MSG_NOSIGNAL);
    return false;
}

bool Acceptor::accept_stream(Pending& p, const wire::ClientHello& h) {
    wire::Bytes out;
    wire::encode_server_auth(out, wire::ServerAuth{.mac = wire::server_auth_mac(token_, h.nonce, p.nonce)});
    // From here on the connection is read with blocking calls bounded by the idle timeout.
    set_nonblocking(p.fd.get(), false);
    set_io_timeout(p.fd.get(), idle_timeout_ms_);
    try {
        send_all(p.fd.get(), out, "handshake");
    } catch (const Error&) {
        return false;
    }
    return true;
}

} // namespace sluice
