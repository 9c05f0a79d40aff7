// Push data streams on a get ring (push_streams.hpp).
#include "serve/get/push_streams.hpp"

#include <unistd.h>

#include <cerrno>
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
        slots_[slot] = std::make_unique<One>(kTagBit | uint64_t{slot} << kSlotShift);
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
    o.reading = true;
}

void PushStreams::on_completion(uint64_t tag, Completion&) {
    const uint32_t slot = static_cast<uint32_t>((tag & ~kTagBit) >> kSlotShift);
    if (slot >= slots_.size() || !slots_[slot]) return;
    drive(slot, *slots_[slot]);
}

// A receive's outcome (both halves of the pair back), taken on the loop while no step runs.
void PushStreams::take_receive(One& o) {
    o.reading = false;
    const bool ending = o.cancelling || o.ends || !o.more; // no receive again
    switch (o.rd.outcome()) {
    case Completion::Outcome::ok: o.got = static_cast<size_t>(o.rd.result()); break;
    case Completion::Outcome::retry:
        if (!ending) arm(o);
        return;
    case Completion::Outcome::failed: o.err = o.rd.error(); break;
    case Completion::Outcome::cancelled:
        if (ending) return;
        // Its deadline: a mark's (receive again at once) or one slice of the idle timeout
        // (again, until the slices add up to it and the rest of the transfer does not excuse
        // the silence); else the stream went silent.
        try {
            if (o.s->timed_out()) return arm(o);
        } catch (const Error& e) {
            o.ends = e;
        }
        return;
    }
    o.rd_done = true;
}

void PushStreams::take_write(One& o) {
    o.writing = false;
    switch (o.wr.outcome()) {
    case Completion::Outcome::ok: o.wr_res = o.wr.result(); break;
    case Completion::Outcome::retry:
        ring_->write(o.wr, o.w.fd, o.w.buf, o.w.len, o.w.offset);
        o.writing = true;
        return;
    case Completion::Outcome::failed: o.wr_res = -o.wr.error(); break;
    case Completion::Outcome::cancelled: o.wr_res = -ECANCELED; break;
    }
    o.wr_done = true;
}

void PushStreams::drive(uint32_t slot, One& o) {
    if (o.stepping) return; // on_step comes back here
    if (o.over) {
        slots_[slot].reset();
        --live_;
        return;
    }
    if (!ring_) return; // abandon() ends it
    if (o.reading && !o.rd.busy() && !o.to.busy()) take_receive(o);
    if (o.writing && !o.wr.busy()) take_write(o);
    if (o.ends || !o.more) {
        // Ending: nothing of the stream may be in flight when it ends (its buffers go with it).
        // Ended well (STREAM_END comes as soon as the data is sent): the write the last step
        // left still goes to the disk, and the stream ends once it has landed (its verdict).
        if (!o.ends && !o.writing) submit_write(o);
        if (o.reading && !o.cancelling) {
            o.cancelling = true;
            if (o.rd.busy()) ring_->cancel(o.rd); // its link timeout goes with it
        }
        if (o.reading || o.writing) return;
        return post(slot, o, true);
    }
    if (o.rd_done || o.wr_done) return post(slot, o, false);
    // Between steps: the write the last one left goes to the disk while the next receive is
    // in flight, into buffers the write does not use.
    if (!o.writing) submit_write(o);
    if (!o.reading) arm(o);
}

void PushStreams::submit_write(One& o) {
    o.w = o.s->next_write();
    if (!o.w.len) return;
    ring_->write(o.wr, o.w.fd, o.w.buf, o.w.len, o.w.offset);
    o.writing = true;
}

void PushStreams::post(uint32_t slot, One& o, bool last) {
    o.stepping = true;
    if (last)
        pool_.post(kTagBit | uint64_t{slot} << kSlotShift, [&o] { last_step(o); });
    else
        pool_.post(kTagBit | uint64_t{slot} << kSlotShift, [&o] { step(o); });
}

void PushStreams::step(One& o) noexcept {
    try {
        if (o.wr_done) {
            o.wr_done = false;
            o.s->wrote(o.wr_res);
        }
        if (o.rd_done) {
            o.rd_done = false;
            if (o.err) throw o.s->broke(o.err);
            o.more = o.s->received(o.got);
            o.got = 0;
        }
    } catch (const Error& e) {
        o.ends = e;
        o.rd_done = false;
    }
}

void PushStreams::last_step(One& o) noexcept {
    if (o.wr_done) {
        o.wr_done = false;
        try {
            o.s->wrote(o.wr_res);
        } catch (const Error& e) {
            if (!o.ends) o.ends = e;
        }
    }
    o.s->end(o.ends ? &*o.ends : nullptr);
    o.s.reset();
    o.over = true;
}

void PushStreams::on_step(uint64_t tag) {
    const uint32_t slot = static_cast<uint32_t>((tag & ~kTagBit) >> kSlotShift);
    if (slot >= slots_.size() || !slots_[slot]) return;
    One& o = *slots_[slot];
    o.stepping = false;
    drive(slot, o);
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
