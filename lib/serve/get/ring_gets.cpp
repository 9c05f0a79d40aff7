#include "serve/get/ring_gets.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/io/sys_error.hpp"
#include "serve/engine/worker.hpp"

namespace sluice::serve {

namespace {

constexpr int kTickMs = 200;
constexpr uint64_t kWakeTag = ~0ull, kSumTag = ~0ull - 1;

} // namespace

RingGets::RingGets(Shared& sh, Attachments& att)
    : sh_(sh), att_(att), efd_(::eventfd(0, EFD_CLOEXEC)), pool_(std::max(1u, sh.opt.cold_read_threads)) {
    if (!efd_) throw_errno(ErrorCode::internal, "eventfd for the get ring");
    att_.set_notify(efd_.get());
    std::lock_guard lock(sh_.paths_mu);
    sh_.get_path = "get ring: single files in clear text from loopback clients that attach (no thread per session); "
                   "session threads: trees, --connect-back, remote clients (encryption), --get-rate-limit";
}

RingGets::~RingGets() { att_.set_notify(-1); }

void RingGets::wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(efd_.get(), &one, sizeof one);
}

bool RingGets::offer(RingStart& s) {
    {
        std::lock_guard lock(mu_);
        if (ended_) return false;
        incoming_.push_back(std::move(s));
    }
    wake();
    return true;
}

void RingGets::take_new(int64_t now) {
    std::vector<RingStart> in;
    {
        std::lock_guard lock(mu_);
        in.swap(incoming_);
    }
    for (RingStart& s : in) {
        uint32_t slot = 0;
        while (slot < sessions_.size() && sessions_[slot]) ++slot;
        if (slot == sessions_.size()) {
            sessions_.emplace_back();
            gens_.push_back(0);
        }
        ++gens_[slot];
        sessions_[slot] = std::make_unique<RingSession>(std::move(s), sh_, *ring_, pool_, slot, gens_[slot], now);
    }
}

void RingGets::run() {
    // sendfile to a client that went away raises SIGPIPE: kept pending on this thread, never
    // delivered (the call fails with EPIPE, which the session reports).
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    std::unique_ptr<Ring> made;
    try {
        made = std::make_unique<Ring>(256); // made on this thread: SINGLE_ISSUER ties it here
    } catch (const Error& e) {
        std::lock_guard lock(mu_);
        ended_ = true; // every get goes to a session thread from here on, and stats say why
        std::lock_guard plock(sh_.paths_mu);
        sh_.get_path = std::string("session threads only: the get ring could not be set up (") + e.what() + ")";
        return;
    }
    Ring& ring = *made;
    ring_ = &ring;
    Completion wake_c(kWakeTag), sum_c(kSumTag);
    uint64_t wake_v = 0, sum_v = 0;
    ring.read(wake_c, efd_.get(), &wake_v, sizeof wake_v, 0);
    ring.read(sum_c, pool_.wake_fd(), &sum_v, sizeof sum_v, 0);
    std::vector<SumJob> sums;
    int64_t now = monotonic_ms(), next_tick = now + kTickMs;
    bool stopping = false;
    for (;;) {
        Completion* c = ring.wait_for(static_cast<int>(std::max<int64_t>(1, next_tick - now)));
        now = monotonic_ms();
        if (c == &wake_c) {
            take_new(now);
            for (auto& s : sessions_)
                if (s) s->on_attach(now);
            ring.read(wake_c, efd_.get(), &wake_v, sizeof wake_v, 0);
        } else if (c == &sum_c) {
            pool_.take(sums);
            for (const SumJob& j : sums)
                if (j.session < sessions_.size() && sessions_[j.session] && sessions_[j.session]->gen() == j.gen)
                    sessions_[j.session]->on_sum(j, now);
            ring.read(sum_c, pool_.wake_fd(), &sum_v, sizeof sum_v, 0);
        } else if (c) {
            const uint64_t slot = c->tag >> RingSession::kTagBits;
            if (slot < sessions_.size() && sessions_[slot])
                sessions_[slot]->on_completion(c->tag & ((1u << RingSession::kTagBits) - 1), *c, now);
        }
        if (now >= next_tick) {
            next_tick = now + kTickMs;
            if (sh_.stopping.load() && !stopping) {
                stopping = true;
                std::lock_guard lock(mu_);
                ended_ = true; // no offer after this one is taken
            }
            if (stopping) take_new(now);
            for (auto& s : sessions_) {
                if (!s) continue;
                if (stopping) s->cancel();
                s->tick(now);
            }
        }
        bool any = false;
        for (auto& s : sessions_) {
            if (s && s->finished()) s.reset();
            any = any || s;
        }
        if (stopping && !any) break;
    }
    sessions_.clear(); // before the ring: their completions are reaped while it lives
    ring_ = nullptr;
}

} // namespace sluice::serve
