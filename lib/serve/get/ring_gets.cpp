#include "serve/get/ring_gets.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/io/mptcp.hpp"
#include "core/io/rtt_deadlines.hpp"
#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "serve/engine/worker.hpp"

namespace sluice::serve {

namespace {

constexpr int kTickMs = 200;
constexpr uint64_t kAcceptTag = ~0ull - 2, kSumTag = ~0ull - 1, kWakeTag = ~0ull - 3;
// Tags of requests: this bit, the slot, then read (0) or write (1).
constexpr uint64_t kRequestBit = 1ull << 62;
// Connections that have not sent their first frame yet: beyond this many, one more is closed
// at once (each holds an fd and up to one frame of 16 KiB until its deadline).
constexpr size_t kMaxWaiting = 1024;

} // namespace

RingGets::RingGets(Shared& sh, Attachments& att, UniqueFd listen, unsigned pool_threads)
    : sh_(sh), att_(att), listen_(std::move(listen)), efd_(::eventfd(0, EFD_CLOEXEC)), pool_(pool_threads), push_streams_(sh, pool_, efd_.get()),
      pushes_(sh, att, push_streams_),
      accept_c_(kAcceptTag) {
    if (!efd_) throw_errno(ErrorCode::internal, "eventfd for a get ring");
}

// The pushes' streams end before the pushes are joined (their receivers wait for them), while
// the pool that may still hold a step of one runs.
RingGets::~RingGets() { push_streams_.abandon(); }

void RingGets::arm_accept() {
    if (stopping_) return;
    ring_->accept(accept_c_, listen_.get(), SOCK_NONBLOCK | SOCK_CLOEXEC, accept_multishot_);
}

void RingGets::on_accept(Completion& c, int64_t now) {
    const bool more = c.flags() & IORING_CQE_F_MORE;
    if (c.outcome() == Completion::Outcome::ok) {
        UniqueFd fd(c.result());
        if (stopping_ || waiting_ >= kMaxWaiting) {
            sh_.get_sessions.fetch_add(1); // closed at once, never queued behind the others
            sh_.get_failed.fetch_add(1);
        } else {
            uint32_t slot = 0;
            while (slot < requests_.size() && requests_[slot]) ++slot;
            if (slot == requests_.size()) requests_.emplace_back();
            ++waiting_;
            requests_[slot] = std::make_unique<RingRequest>(std::move(fd), sh_, *ring_, kRequestBit | uint64_t{slot} << 1, now);
            after(slot, now);
        }
    }
    if (more || accept_c_.busy() || c.outcome() == Completion::Outcome::cancelled || stopping_) return;
    if (c.outcome() == Completion::Outcome::failed && c.error() == EINVAL && accept_multishot_) {
        accept_multishot_ = false; // before Linux 5.19: one accept per connection
        return arm_accept();
    }
    // EMFILE and the like would fail again at once: re-armed at the next tick, while the
    // connection waits in the backlog and sessions end.
    if (c.outcome() == Completion::Outcome::failed)
        accept_retry_ = true;
    else
        arm_accept();
}

// Certificate mode: the handshake and the request's records are stepped on this ring
// (ring_request_tls.cpp). The session takes its --max-gets place before the handshake, so
// handshakes in progress are bounded as sessions are (a place held from here on to its
// RingSession). Over the bound the connection is closed: there is no way to say "busy" in
// clear to a client that began TLS.
void RingGets::on_tls(RingRequest& r) {
    sh_.get_sessions.fetch_add(1);
    sh_.get_certificate.fetch_add(1);
    Admission admission = Admission::take(sh_.get_admitted, sh_.opt.max_get_sessions);
    if (!admission) {
        sh_.get_failed.fetch_add(1);
        if (sh_.opt.verbose && sh_.opt.log)
            sh_.opt.log("get session in certificate mode: closed before its handshake: the server is sending " +
                        std::to_string(sh_.opt.max_get_sessions) + " gets (--max-gets)");
        r.take();
        return;
    }
    r.asked().admission = std::move(admission);
    r.start_tls(*sh_.get_certs);
}

void RingGets::on_request(RingRequest& r, uint32_t slot) {
    Asked& a = r.asked();
    if (a.push) return pushes_.admit(r); // `sluice send` into DIR (push_sessions.hpp)
    if (sh_.opt.get_mptcp && sh_.opt.verbose && sh_.opt.log) {
        const ConnectionMptcp m = mptcp_of(a.fd.get(), 0, true, true);
        sh_.opt.log("get session from " + a.host + ": the request came over " + (m.mptcp ? "MPTCP" : "plain TCP: " + m.why));
    }
    // A place under --max-gets, over every ring (attached connections take none); certificate
    // mode took it before its handshake (on_tls).
    Admission admission = a.admission ? std::move(a.admission) : Admission::take(sh_.get_admitted, sh_.opt.max_get_sessions);
    const bool busy = !admission;
    Judged j = judge(sh_, att_, a, busy, efd_.get(), false);
    if (j.tree) {
        // A tree's walk (readdir, openat and fstat of every entry) may wait for the disk: it
        // runs on the pool, judged again there (the same checks, then the walk), and the
        // request waits in the ring until it is back (on_walked).
        r.start.admission = std::move(admission);
        r.walking = true;
        Shared& sh = sh_;
        Attachments& att = att_;
        const int notify = efd_.get();
        pool_.post(slot, [&sh, &att, &r, notify] {
            try {
                r.walked = judge(sh, att, r.asked(), false, notify);
            } catch (const Error& e) {
                r.walk_error = e.what();
            }
        });
        return;
    }
    answer(r, std::move(j), std::move(admission));
}

void RingGets::on_walked(uint32_t slot) {
    if (slot >= requests_.size() || !requests_[slot]) return;
    RingRequest& r = *requests_[slot];
    r.walking = false;
    Judged j = std::move(r.walked);
    Admission admission = std::move(r.start.admission);
    if (r.state() != RingRequest::St::request) { // closed meanwhile (the server stops): j goes with its fds
        sh_.get_failed.fetch_add(1);
        return;
    }
    if (!r.walk_error.empty()) {
        // The server's own fault (as an fd table full while opening): no reply, the connection closed.
        sh_.get_failed.fetch_add(1);
        if (sh_.opt.verbose && sh_.opt.log) sh_.opt.log("get session: " + r.walk_error);
        r.take();
        return;
    }
    answer(r, std::move(j), std::move(admission));
}

void RingGets::answer(RingRequest& r, Judged j, Admission admission) {
    Asked& a = r.asked();
    if (j.reply.status != wire::GetStatus::ok) {
        sh_.get_failed.fetch_add(1);
        return r.reply(j.reply);
    }
    RingStart& s = r.start;
    s.src = std::move(j.src);
    s.slot = std::move(j.slot);
    s.label = "'" + a.q.path + "' by " + a.host;
    s.streams = a.q.streams;
    s.receiver_token = j.transfer_token; // bound (h18p) or, from an older client, its receiver_token
    s.attach_wait_ms = rtt_scaled_ms(SendOptions{}.connect_timeout_ms, a.rtt_us);
    s.idle_ms = sh_.opt.send_timeout_ms;
    s.rate = sh_.opt.get_rate_limit;
    s.admission = std::move(admission);
    // --connect-back: the session connects out to the request's own address (never one the
    // request names), the control connection under the attach wait's deadline.
    if (a.q.reply_port != 0 && !connect_back_to(a.fd.get(), a.q.reply_port, s.attach_wait_ms, s.back)) {
        sh_.get_failed.fetch_add(1);
        wire::GetReply no;
        no.status = wire::GetStatus::bad_request;
        no.message = "the client's address is unknown (getpeername failed)";
        no.mac = j.reply.mac;
        return r.reply(no);
    }
    r.reply(j.reply);
}

void RingGets::start_session(RingStart s, int64_t now) {
    uint32_t slot = 0;
    while (slot < sessions_.size() && sessions_[slot]) ++slot;
    if (slot == sessions_.size()) {
        sessions_.emplace_back();
        gens_.push_back(0);
    }
    ++gens_[slot];
    sh_.get_ring.fetch_add(1);
    if (s.back.len) sh_.get_ring_connect_back.fetch_add(1);
    sessions_[slot] = std::make_unique<RingSession>(std::move(s), sh_, *ring_, pool_, slot, gens_[slot], now);
    if (sessions_[slot]->tree()) sh_.get_ring_tree.fetch_add(1);
}

void RingGets::after(uint32_t slot, int64_t now) {
    RingRequest& r = *requests_[slot];
    using St = RingRequest::St;
    if (r.state() == St::tls) on_tls(r);
    if (r.state() == St::request && !r.walking) on_request(r, slot);
    if (r.state() == St::attach) {
        const std::string host = peer_address(r.asked().fd.get()).host;
        UniqueFd fd = r.take(); // non-blocking, as the RingSession that takes it keeps it
        // The ring running that get hears of it through its eventfd (this one's too).
        if (!att_.attach(r.nonce(), std::move(fd), host) && sh_.opt.verbose && sh_.opt.log)
            sh_.opt.log("get session: a GET_ATTACH for no waiting get (unknown, from another address, or one too many): closed");
    }
    if (r.state() == St::ready) {
        RingStart s = std::move(r.start);
        s.request_sealer = r.take_sealer();
        s.request = r.take();
        start_session(std::move(s), now);
    }
    if (r.finished()) {
        requests_[slot].reset();
        --waiting_;
    }
}

void RingGets::run() {
    // sendfile to a client that went away raises SIGPIPE: kept pending on this thread, never
    // delivered (the call fails with EPIPE, which the session reports).
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    std::unique_ptr<Ring> made = std::make_unique<Ring>(256); // made on this thread: SINGLE_ISSUER ties it here
    Ring& ring = *made;
    ring_ = &ring;
    push_streams_.attach(ring);
    Completion sum_c(kSumTag), wake_c(kWakeTag);
    uint64_t sum_v = 0, wake_v = 0;
    arm_accept();
    ring.read(sum_c, pool_.wake_fd(), &sum_v, sizeof sum_v, 0);
    ring.read(wake_c, efd_.get(), &wake_v, sizeof wake_v, 0);
    std::vector<SumJob> sums;
    std::vector<uint64_t> walks;
    int64_t now = monotonic_ms(), next_tick = now + kTickMs;
    for (;;) {
        Completion* c = ring.wait_for(static_cast<int>(std::max<int64_t>(1, next_tick - now)));
        now = monotonic_ms();
        if (c == &accept_c_) {
            on_accept(*c, now);
        } else if (c == &wake_c) {
            push_streams_.on_wake();
            for (auto& s : sessions_)
                if (s) s->on_attach(now);
            ring.read(wake_c, efd_.get(), &wake_v, sizeof wake_v, 0);
        } else if (c == &sum_c) {
            pool_.take(sums);
            for (const SumJob& j : sums)
                if (j.session < sessions_.size() && sessions_[j.session] && sessions_[j.session]->gen() == j.gen)
                    sessions_[j.session]->on_sum(j, now);
            pool_.take_tasks(walks);
            for (const uint64_t slot : walks) {
                if (slot & PushStreams::kTagBit) {
                    push_streams_.on_step(slot);
                    continue;
                }
                on_walked(static_cast<uint32_t>(slot));
                if (slot < requests_.size() && requests_[slot]) after(static_cast<uint32_t>(slot), now);
            }
            ring.read(sum_c, pool_.wake_fd(), &sum_v, sizeof sum_v, 0);
        } else if (c && (c->tag & PushStreams::kTagBit)) {
            push_streams_.on_completion(c->tag, *c);
        } else if (c && (c->tag & kRequestBit)) {
            const uint64_t slot = (c->tag & ~kRequestBit) >> 1;
            if (slot < requests_.size() && requests_[slot]) {
                requests_[slot]->on_completion(c->tag & 1, *c, now);
                after(static_cast<uint32_t>(slot), now);
            }
        } else if (c) {
            const uint64_t slot = c->tag >> RingSession::kTagBits;
            if (slot < sessions_.size() && sessions_[slot])
                sessions_[slot]->on_completion(c->tag & ((1u << RingSession::kTagBits) - 1), *c, now);
        }
        if (now >= next_tick) {
            next_tick = now + kTickMs;
            pushes_.tick(now);
            if (sh_.stopping.load() && !stopping_) {
                stopping_ = true;
                if (accept_c_.busy()) ring.cancel(accept_c_);
            }
            if (accept_retry_ && !stopping_) {
                accept_retry_ = false;
                arm_accept();
            }
            for (uint32_t i = 0; i < requests_.size(); ++i) {
                if (!requests_[i]) continue;
                if (stopping_) requests_[i]->cancel();
                requests_[i]->tick(now);
                after(i, now);
            }
            for (auto& s : sessions_) {
                if (!s) continue;
                if (stopping_) s->cancel();
                s->tick(now);
            }
            // Cancels their transfers (their streams, on this ring, end as their sockets are shut
            // down): the loop runs until they have.
            if (stopping_) pushes_.cancel_all();
        }
        bool any = accept_c_.busy() || waiting_ > 0 || pushes_.running() || push_streams_.any();
        for (auto& s : sessions_) {
            if (s && s->finished()) s.reset();
            any = any || s;
        }
        if (stopping_ && !any) break;
    }
    sessions_.clear(); // before the ring: their completions are reaped while it lives
    requests_.clear();
    pushes_.stop(); // all ended: joins their threads
    ring_ = nullptr;
}

} // namespace sluice::serve
