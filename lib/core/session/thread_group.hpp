#pragma once
// Threads that call back into the session that started them (its data streams, its control
// reader). The session owns them as a member, never as locals of its run(): an error thrown
// out of run() then cannot unwind past a running thread (a joinable std::thread destroyed is
// std::terminate) nor free what it uses; the session joins them in its stop(), called first
// by its most-derived destructor, while every object they call into still exists.
#include <thread>
#include <utility>
#include <vector>

namespace sluice {

class ThreadGroup {
public:
    ThreadGroup() = default;
    // A last resort: the session joins them in its stop(), before its own members go.
    ~ThreadGroup() { join(); }
    ThreadGroup(const ThreadGroup&) = delete;
    ThreadGroup& operator=(const ThreadGroup&) = delete;

    template <class F> void start(F&& f) { threads_.emplace_back(std::forward<F>(f)); }
    // Waits for every thread started so far. The owner's thread only.
    void join() noexcept {
        for (auto& t : threads_)
            if (t.joinable()) t.join();
        threads_.clear();
    }

private:
    std::vector<std::thread> threads_;
};

} // namespace sluice
