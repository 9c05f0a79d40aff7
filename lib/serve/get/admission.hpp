#pragma once
// One get session's place under --max-gets (ServeOptions::max_get_sessions), shared by every
// get ring and session thread: taken when a request is admitted, given back when whatever
// holds it (the ring's reply in flight, its RingSession, a session thread's request) goes.
#include <atomic>

namespace sluice::serve {

class Admission {
public:
    Admission() = default;
    // Takes a place if fewer than most are taken; empty (false) otherwise.
    static Admission take(std::atomic<unsigned>& taken, unsigned most) {
        unsigned n = taken.load();
        do {
            if (n >= most) return {};
        } while (!taken.compare_exchange_weak(n, n + 1));
        Admission a;
        a.taken_ = &taken;
        return a;
    }
    Admission(Admission&& o) noexcept : taken_(o.taken_) { o.taken_ = nullptr; }
    Admission& operator=(Admission&& o) noexcept {
        if (this != &o) {
            release();
            taken_ = o.taken_;
            o.taken_ = nullptr;
        }
        return *this;
    }
    ~Admission() { release(); }
    explicit operator bool() const { return taken_ != nullptr; }

private:
    void release() {
        if (taken_) taken_->fetch_sub(1);
        taken_ = nullptr;
    }
    std::atomic<unsigned>* taken_ = nullptr;
};

} // namespace sluice::serve
