#include "recv/session/acceptor.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <unordered_map>
#include <cstring>
#include <vector>

#include "core/io/socket.hpp"
#include "core/io/tcp_tuning.hpp"
#include "core/io/sys_error.hpp"
#include "core/stats/process_usage.hpp"
#include "core/tls/policy.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

namespace {

// Why these numbers (docs/guarantees.md, "A flood of connections"): 256 pending sockets are
// far below the fd limit, a sender has at most 9 pending at a time (its control connection and
// 8 data streams opening side by side, which connect during the control's handshake:
// send/session/connect.cpp), and 16 per source leaves room for that while a single flooding
// address can never hold more than 1/16 of the table.
constexpr size_t kMaxPendingHandshakes = 256;
constexpr size_t kMaxPendingPerSource = 16;
constexpr int kHandshakeDeadlineMs = 10000;
// Connections taken from the listen backlog per round, so the pending handshakes get a turn
// between bursts; the next poll() returns at once while the backlog holds more.
constexpr int kAcceptsPerRound = 256;

// The source a connection is counted against: the IPv4 address, or the /64 prefix of an IPv6
// address (a host usually owns a whole /64). IPv4 keys carry a prefix (ffff:ffff::/32, in the
// multicast range, which is never a TCP source) so they cannot collide with an IPv6 prefix.
uint64_t source_of(const sockaddr_storage& ss) {
    if (ss.ss_family == AF_INET6) {
        const auto& a = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&a)) {
            uint32_t v4 = 0;
            std::memcpy(&v4, a.s6_addr + 12, 4);
            return 0xffff'ffff'0000'0000ull | ntohl(v4);
        }
        uint64_t prefix = 0;
        for (int i = 0; i < 8; ++i) prefix = prefix << 8 | a.s6_addr[i];
        return prefix;
    }
    if (ss.ss_family == AF_INET)
        return 0xffff'ffff'0000'0000ull | ntohl(reinterpret_cast<const sockaddr_in&>(ss).sin_addr.s_addr);
    return 0;
}

std::string source_text(uint64_t source) {
    char buf[INET6_ADDRSTRLEN + 8] = {};
    if ((source >> 32) == 0xffff'ffffu) {
        in_addr a{.s_addr = htonl(static_cast<uint32_t>(source))};
        ::inet_ntop(AF_INET, &a, buf, sizeof buf);
        return buf;
    }
    in6_addr a{};
    for (int i = 0; i < 8; ++i) a.s6_addr[i] = static_cast<unsigned char>(source >> (56 - 8 * i));
    ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
    return std::string(buf) + "/64";
}

} // namespace

struct Acceptor::Pending {
    UniqueFd fd;
    std::array<unsigned char, wire::kNonceBytes> nonce{};
    std::array<unsigned char, wire::kClientHelloBytes> hello{};
    size_t got = 0;
    Clock::time_point deadline;
    uint64_t source = 0;
    uint16_t features = 0; // what our ServerHello said
    bool adopted = false;  // opened by this side (adopt()): never dropped to make room, not a flood's
};

Acceptor::Acceptor(const RecvOptions& opts, SessionLog& log)
    : idle_timeout_ms_(opts.idle_timeout_ms), encrypt_(opts.encrypt), log_(log), token_(opts.token.empty() ? wire::random_token() : opts.token) {
    check_congestion_control(opts.congestion_control); // a typo fails before the port is taken
    listener_ = listen_tcp(opts.bind_address, opts.port, {.mptcp = opts.mptcp});
    // Accepted connections inherit the listener's algorithm (tcp_ca_openreq_child), so the
    // handshake already runs under it.
    set_congestion_control(listener_.get(), opts.congestion_control);
    port_ = local_port(listener_.get());
    // The accept loop drains bursts of connections and must never block on accept.
    set_nonblocking(listener_.get(), true);
    wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) throw_errno(ErrorCode::internal, "eventfd");
    std::array<unsigned char, 8> seed{};
    wire::random_bytes(seed);
    uint64_t s = 0;
    std::memcpy(&s, seed.data(), sizeof s);
    rng_.seed(s); // unpredictable, so a flood cannot aim its evictions
}

std::string Acceptor::congestion_control() const { return congestion_control_of(listener_.get()); }

void Acceptor::wake() noexcept {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

void Acceptor::run(Admission& admission) {
    std::vector<Pending> pending;
    pending.reserve(kMaxPendingHandshakes);
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
        take_adopted(pending);
        admission.after_round();
    }
}

void Acceptor::accept_new(std::vector<Pending>& pending) {
    size_t dropped = 0;
    for (int burst = 0; burst < kAcceptsPerRound; ++burst) {
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        greet(UniqueFd(fd), peer, pending, dropped, false);
    }
    // One line per round, not per connection: a flood must not become a flood of log lines.
    if (dropped) log_.verbose_line("too many pending handshakes: dropped " + std::to_string(dropped));
}

bool Acceptor::greet(UniqueFd fd, const sockaddr_storage& peer, std::vector<Pending>& pending, size_t& dropped,
                     bool adopted) {
    // Scaled with the round trip the connection's own handshake measured (tcp_tuning.hpp): a
    // far sender gets 64 RTOs (round trip + 200 ms each); a flood on a near one (under 2 ms)
    // still holds a slot 10 s at most.
    const int deadline_ms = rtt_scaled_ms(kHandshakeDeadlineMs, smoothed_rtt_us(fd.get()));
    Pending p{.fd = std::move(fd),
              .deadline = Clock::now() + std::chrono::milliseconds(deadline_ms),
              .source = source_of(peer),
              .adopted = adopted};
    wire::random_bytes(p.nonce);
    p.features = wire::kFeatureSparse | wire::kFeatureUpdate | wire::kFeatureTreeMeta | wire::kFeatureStreamReconnect |
                 wire::kFeatureAnnounceWindow | wire::kFeatureCertificateVerdict | wire::kFeatureExactMeta;
    if (tls::wants_encryption(encrypt_, peer)) p.features |= wire::kFeatureEncryption;
    wire::Bytes out;
    wire::encode_server_hello(out, wire::ServerHello{.features = p.features, .nonce = p.nonce});
    if (::send(p.fd.get(), out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) return false;
    // A get's own connections all come from the server's address, more than the 16 a source
    // may have pending, and they wait for the sender to take them one by one: they are this
    // side's (bounded by adopt()), so they neither make room nor are dropped for it.
    if (!adopted) dropped += make_room(pending, p.source);
    pending.push_back(std::move(p));
    return true;
}

void Acceptor::adopt(UniqueFd fd) {
    {
        std::lock_guard lock(adopted_mu_);
        if (adopted_.size() >= kMaxPendingHandshakes) return; // closed: as a flood's would be
        adopted_.push_back(std::move(fd));
    }
    wake();
}

void Acceptor::take_adopted(std::vector<Pending>& pending) {
    std::vector<UniqueFd> mine;
    {
        std::lock_guard lock(adopted_mu_);
        mine.swap(adopted_);
    }
    size_t dropped = 0;
    for (UniqueFd& fd : mine) {
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
        set_nonblocking(fd.get(), true);
        greet(std::move(fd), peer, pending, dropped, true);
    }
    if (dropped) log_.verbose_line("too many pending handshakes: dropped " + std::to_string(dropped));
}

// Bounded per source and in total, so a flood cannot exhaust fds. The oldest entry is not the
// one dropped (it is as likely to be a sender whose hello is one round trip away as a silent
// attacker); a random one of the source with the most entries is, so a flood mostly evicts
// itself, and a source holding one or two entries (a real sender connects one at a time) is
// reached only by a flood from at least as many addresses as the table has slots.
size_t Acceptor::make_room(std::vector<Pending>& pending, uint64_t source) {
    auto drop_random_of = [&](auto&& eligible) -> size_t {
        std::vector<size_t> candidates;
        for (size_t i = 0; i < pending.size(); ++i)
            if (eligible(pending[i])) candidates.push_back(i);
        if (candidates.empty()) return 0;
        size_t victim = candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng_)];
        pending.erase(pending.begin() + static_cast<long>(victim));
        return 1;
    };
    // Adopted connections are neither counted nor dropped (greet()).
    std::unordered_map<uint64_t, size_t> counts; // one pass: this runs per connection of a flood
    size_t accepted = 0;
    for (const auto& q : pending)
        if (!q.adopted) ++counts[q.source], ++accepted;
    if (counts[source] >= kMaxPendingPerSource)
        return drop_random_of([&](const Pending& q) { return q.source == source && !q.adopted; });
    if (accepted < kMaxPendingHandshakes) return 0;
    // The transfer's own address is left out: its data streams must not be evicted by others.
    auto protected_source = [&](uint64_t s) { return have_transfer_source_ && s == transfer_source_; };
    size_t most = 0;
    for (auto [s, n] : counts)
        if (!protected_source(s)) most = std::max(most, n);
    return drop_random_of([&](const Pending& q) { return !q.adopted && !protected_source(q.source) && counts[q.source] == most; });
}

// Returns false when the connection is finished with (handed over or refused).
bool Acceptor::advance_handshake(Admission& admission, Pending& p) {
    ssize_t n = ::recv(p.fd.get(), p.hello.data() + p.got, p.hello.size() - p.got, 0);
    if (n <= 0) return n < 0 && (errno == EAGAIN || errno == EINTR);
    p.got += static_cast<size_t>(n);
    // Not a sluice hello: refused at once rather than holding a slot until its deadline.
    if (std::memcmp(p.hello.data(), wire::kMagic.data(), std::min(p.got, wire::kMagic.size())) != 0) {
        log_.verbose_line("refused a connection from " + source_text(p.source) + ": not a sluice hello");
        return false;
    }
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
        warn_wrong_token(p.source);
        return refuse(p, wire::AuthStatus::bad_token);
    }
    const bool we_encrypt = p.features & wire::kFeatureEncryption;
    if (we_encrypt != bool(h.features & wire::kFeatureEncryption)) {
        log_.line("warning: " + tls::mismatch_text_for_receiver(source_text(p.source), we_encrypt));
        return refuse(p, wire::AuthStatus::encryption_mismatch);
    }
    // Admission and joining happen on this thread only, so nothing can change in between.
    if (auto status = admission.admit(h); status != wire::AuthStatus::ok) return refuse(p, status);
    if (!accept_stream(p, h)) return false;
    if (we_encrypt) admission.encrypted(h, tls::hello_psk(token_, p.nonce, p.features, h));
    if (h.role == wire::Role::control) {
        transfer_source_ = p.source;
        have_transfer_source_ = true;
    }
    admission.join(h, std::move(p.fd), p.adopted);
    return false;
}

// A wrong token is worth a warning without -v (a sender with a stale token, or someone guessing),
// but a flood of them must not flood stderr: the first is named, then at most one line per
// kWrongTokenQuiet sums up how many more were refused.
void Acceptor::warn_wrong_token(uint64_t source) {
    const auto now = std::chrono::steady_clock::now();
    if (wrong_token_since_ != std::chrono::steady_clock::time_point{} && now - wrong_token_since_ < kWrongTokenQuiet) {
        ++wrong_token_unsaid_;
        return;
    }
    if (wrong_token_unsaid_ > 0)
        log_.line("warning: refused " + std::to_string(wrong_token_unsaid_) +
                  " more connection(s) with a wrong token in the last " +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - wrong_token_since_).count()) + " s");
    log_.line("warning: refused a connection from " + source_text(source) + ": wrong token");
    wrong_token_since_ = now;
    wrong_token_unsaid_ = 0;
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
