// Push data streams on a get ring (push_streams.hpp).
#include "serve/get/push_streams.hpp"

#include <unistd.h>

#include <chrono>
#include <thread>

#include "serve/engine/shared.hpp"

namespace sluice::serve {

namespace {

Error ring_gone() { return Error(ErrorCode::cancelled, "the server stopped receiving this push (its ring ended)"); }

} // namespace

PushStreams::~PushStreams() { abandon(); }

void PushStreams::host(std::unique_ptr<HostedStream> s) {
    {
        std::lock_guard lock(mu_);
        if (!closed_) {
            incoming_.push_back(std::move(s));
            sh_.push_streams_ring.fetch_add(1);
            const uint64_t one = 1;
            (void)!::write(notify_, &one, sizeof one);
            return;
        }
    }
    const Error e = ring_gone();
    s->end(&e);
}

bool PushStreams::waiting() const {
    std::lock_guard lock(mu_);
    return !incoming_.empty();
}

void PushStreams::on_wake() {
    std::vector<std::unique_ptr<HostedStream>> taken;
    {
        std::lock_guard lock(mu_);
        taken.swap(incoming_);
    }
    for (auto& s : taken) {
        uint32_t slot = 0;
        while (slot < slots_.size() && slots_[slot]) ++slot;
        if (slot == slots_.size()) slots_.emplace_back();
        slots_[slot] = std::make_unique<One>(kTagBit | uint64_t{slot} << 1);
        slots_[slot]->s = std::move(s);
        ++live_;
        arm(*slots_[slot]);
    }
}

void PushStreams::arm(One& o) {
    const HostedStream::Read r = o.s->next_read();
    auto chain = ring_->chain(2);
    ring_->recv(o.rd, o.s->fd(), r.buf, r.len, 0, r.poll_first);
    ring_->link_timeout(o.to, *r.timeout);
}

void PushStreams::on_completion(uint64_t tag, Completion&) {
    const uint32_t slot = static_cast<uint32_t>((tag & ~kTagBit) >> 1);
    if (slot >= slots_.size() || !slots_[slot]) return;
    One& o = *slots_[slot];
    if (o.rd.busy() || o.to.busy() || o.stepping) return; // the other half of the pair is still to come
    switch (o.rd.outcome()) {
    case Completion::Outcome::ok: o.got = static_cast<size_t>(o.rd.result()); break;
    case Completion::Outcome::retry: return arm(o);
    case Completion::Outcome::failed: o.err = o.rd.error(); break;
    case Completion::Outcome::cancelled:
        // Its deadline: a mark's (receive again at once) or the idle timeout's, which the
        // rest of the transfer may excuse; else the stream went silent.
        try {
            if (o.s->timed_out()) return arm(o);
        } catch (const Error& e) {
            o.ends = e;
        }
        break;
    }
    post(slot, o);
}

void PushStreams::post(uint32_t slot, One& o) {
    o.stepping = true;
    pool_.post(kTagBit | uint64_t{slot} << 1, [&o] { step(o); });
}

void PushStreams::step(One& o) noexcept {
    try {
        if (o.ends) throw *o.ends;
        if (o.err) throw o.s->broke(o.err);
        if (o.s->received(o.got)) return;
        o.s->end(nullptr);
    } catch (const Error& e) {
        o.s->end(&e);
    }
    o.s.reset();
    o.over = true;
}

void PushStreams::on_step(uint64_t tag) {
    const uint32_t slot = static_cast<uint32_t>((tag & ~kTagBit) >> 1);
    if (slot >= slots_.size() || !slots_[slot]) return;
    One& o = *slots_[slot];
    o.stepping = false;
    o.got = 0;
    o.err = 0;
    if (!o.over && ring_) return arm(o);
    if (!o.over) return; // abandon() ends it
    slots_[slot].reset();
    --live_;
}

void PushStreams::abandon() {
    std::vector<std::unique_ptr<HostedStream>> taken;
    {
        std::lock_guard lock(mu_);
        closed_ = true;
        taken.swap(incoming_);
    }
    ring_ = nullptr;
    const Error e = ring_gone();
    for (auto& s : taken) s->end(&e);
    // Steps on the pool finish before their streams are ended here (the pool drops nothing it
    // has begun; one not begun runs before the pool's threads end, as every task does).
    std::vector<uint64_t> tags;
    for (;;) {
        bool stepping = false;
        for (auto& o : slots_) stepping = stepping || (o && o->stepping);
        if (!stepping) break;
        pool_.take_tasks(tags);
        for (uint64_t t : tags)
            if (t & kTagBit) on_step(t);
        tags.clear();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (auto& o : slots_) {
        if (!o) continue;
        o->s->end(&e);
        o.reset();
    }
    live_ = 0;
}

} // namespace sluice::serve
