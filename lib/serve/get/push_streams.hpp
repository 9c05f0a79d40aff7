#pragma once
// The data streams of pushes, received on a get ring (docs/design.md, "Pushes"): the ring that
// admitted a push hosts each of its data streams (core/session/hosted_streams.hpp) instead of
// a thread per stream. On the ring: one receive at a time per stream, into the stream's own
// buffer (2 MiB: bounded whatever the sender does), with the stream's link timeout (every
// receive has a deadline: the idle timeout, or a low-water mark's second); a receive that
// ends goes to the ring's pool (SumPool::post), where its bytes are parsed, written at their
// offsets, summed and verified, and its files finished (all of which may wait for the disk),
// and the next receive is armed once that step is back. The one disk write a step may leave
// (HostedStream::next_write) is written on the ring meanwhile, beside that receive; its result
// goes to the stream in its next step, and a stream ends only with nothing of it in flight.
// A slow or silent pusher holds its own stream's buffers and nothing of the ring's: its
// receive waits in the kernel.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/ring/ring.hpp"
#include "core/session/hosted_streams.hpp"
#include "serve/get/sum_pool.hpp"

namespace sluice::serve {

struct Shared;

class PushStreams final : public StreamHost {
public:
    // Completion and pool-task tags: this bit, the slot, then receive (0), its timeout (1) or
    // the stream's disk write (2).
    static constexpr uint64_t kTagBit = 1ull << 61;

    // notify: the ring's eventfd, written when a stream is handed over.
    PushStreams(Shared& sh, SumPool& pool, int notify) : sh_(sh), pool_(pool), notify_(notify) {}
    ~PushStreams() override; // abandon()s what is left
    PushStreams(const PushStreams&) = delete;
    PushStreams& operator=(const PushStreams&) = delete;

    // StreamHost: from the push's thread.
    void host(std::unique_ptr<HostedStream> s) override;

    // On the ring's thread, while run() runs (ring: its ring, until detach()).
    void attach(Ring& ring) { ring_ = &ring; }
    void on_wake();                                   // streams handed over: their first receive
    void on_completion(uint64_t tag, Completion& c);  // a stream's receive or its timeout
    void on_step(uint64_t tag);                       // a step back from the pool
    bool any() const { return live_ > 0 || waiting(); }
    // After the ring is gone (its requests reaped): every stream still hosted ends with a
    // cancelled Error, once its step on the pool (if any) is back; later ones end at once.
    void abandon();

private:
    struct One {
        explicit One(uint64_t tag) : rd(tag), to(tag + 1), wr(tag + 2) {}
        std::unique_ptr<HostedStream> s;
        Completion rd, to, wr;
        HostedStream::Write w{};   // the write on the ring (wr)
        bool reading = false;      // rd/to submitted, their outcome not taken yet
        bool writing = false;      // wr submitted, its outcome not taken yet
        bool cancelling = false;   // rd cancelled: the stream is ending
        bool rd_done = false;      // a receive's outcome waits for its step (got, err)
        bool wr_done = false;      // the write's outcome waits for its step (wr_res)
        size_t got = 0;
        int err = 0;
        int wr_res = 0;
        bool more = true;          // the stream wants more receives
        std::optional<Error> ends; // the stream ends with this (it went silent, or a step failed)
        bool stepping = false;     // on the pool
        bool over = false;         // the last step ended it (s is gone)
    };
    static constexpr unsigned kSlotShift = 2;
    bool waiting() const;
    void arm(One& o);
    void drive(uint32_t slot, One& o); // on the loop, whenever o may move on
    void take_receive(One& o);
    void take_write(One& o);
    void submit_write(One& o);
    void post(uint32_t slot, One& o, bool last);
    static void step(One& o) noexcept;
    static void last_step(One& o) noexcept;

    Shared& sh_;
    SumPool& pool_;
    int notify_;
    Ring* ring_ = nullptr;
    mutable std::mutex mu_;                              // guards incoming_ and closed_
    std::vector<std::unique_ptr<HostedStream>> incoming_; // handed over, not yet taken by the ring
    bool closed_ = false;                                // abandon()ed: streams end at once
    std::vector<std::unique_ptr<One>> slots_;           // by slot; null: free
    size_t live_ = 0;                                   // slots in use
};

} // namespace sluice::serve
