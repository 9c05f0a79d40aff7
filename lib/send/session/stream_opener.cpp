#include "send/session/stream_opener.hpp"

#include <algorithm>
#include <atomic>

#include "sluice/error.hpp"

namespace sluice {

void StreamOpener::start(unsigned count, unsigned width, std::function<void(unsigned)> open,
                         std::function<bool()> stopped) {
    open_ = std::move(open);
    stopped_ = std::move(stopped);
    state_.assign(count, State::pending);
    error_.assign(count, nullptr);
    t0_ = Clock::now();
    thread_ = std::thread([this, width] { run(width); });
}

void StreamOpener::settle(unsigned i, State s, std::exception_ptr e) {
    {
        std::lock_guard lk(mu_);
        state_[i] = s;
        error_[i] = std::move(e);
        if (s == State::open) {
            last_ = Clock::now();
            if (opened_++ == 0) first_ = last_;
        }
    }
    cv_.notify_all();
}

void StreamOpener::run(unsigned width) {
    const auto count = static_cast<unsigned>(state_.size());
    std::vector<char> again(count, 0); // failed on the network: opened once more, alone (char: one thread per slot)
    std::atomic<unsigned> next{0};
    std::atomic<bool> failed{false};
    auto open_one = [&](unsigned i, bool retry) {
        try {
            open_(i + 1);
            settle(i, State::open);
        } catch (const Error& e) {
            // A receiver under a flood of connections from our address drops pending
            // handshakes at random, our own side-by-side ones included (acceptor.cpp).
            // Dropped is a reset or an end of file, whichever the close met.
            if (!retry && e.code() == ErrorCode::network &&
                (e.cause() == ErrorCause::peer_reset || e.cause() == ErrorCause::peer_closed)) {
                again[i] = 1;
                return;
            }
            settle(i, State::failed, std::current_exception());
            failed = true;
        } catch (...) {
            settle(i, State::failed, std::current_exception());
            failed = true;
        }
    };
    auto work = [&] {
        for (unsigned i; !failed.load() && !stopped_() && (i = next.fetch_add(1)) < count;) open_one(i, false);
    };
    {
        std::vector<std::jthread> pool;
        const unsigned threads = std::clamp(width, 1u, std::max(count, 1u));
        for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
        work(); // this thread is one of them
    }
    for (unsigned i = 0; i < count; ++i)
        if (again[i] && !failed.load() && !stopped_()) open_one(i, true);
    {
        std::lock_guard lk(mu_);
        for (State& s : state_)
            if (s == State::pending) s = State::abandoned; // never started: another failed, or the transfer stopped
    }
    cv_.notify_all();
}

bool StreamOpener::await(unsigned i, const std::function<bool()>& stopped) {
    std::unique_lock lk(mu_);
    for (;;) {
        switch (state_.at(i - 1)) {
        case State::open: return true;
        case State::failed: std::rethrow_exception(error_[i - 1]);
        case State::abandoned: return false;
        case State::pending: break;
        }
        if (stopped()) return false;
        cv_.wait_for(lk, std::chrono::milliseconds(100));
    }
}

bool StreamOpener::await_all(const std::function<bool()>& stopped) {
    std::unique_lock lk(mu_);
    for (;;) {
        if (std::none_of(state_.begin(), state_.end(), [](State s) { return s == State::pending; })) break;
        if (stopped()) return false;
        cv_.wait_for(lk, std::chrono::milliseconds(100));
    }
    for (size_t i = 0; i < state_.size(); ++i)
        if (state_[i] == State::failed) std::rethrow_exception(error_[i]);
    return std::all_of(state_.begin(), state_.end(), [](State s) { return s == State::open; });
}

void StreamOpener::join() {
    if (thread_.joinable()) thread_.join();
}

std::string StreamOpener::timeline() const {
    std::lock_guard lk(mu_);
    auto ms = [&](Clock::time_point t) {
        return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(t - t0_).count()) + " ms";
    };
    if (opened_ == 0) return "no data stream opened";
    // start() runs once the control connection's TCP connect is done, before its hello
    // (connect.cpp): the times count from there.
    return "data streams opened side by side: the first after " + ms(first_) + ", " + std::to_string(opened_) + " of " +
           std::to_string(state_.size()) + " after " + ms(last_) +
           " from the control connection's connect (each sent as soon as it was open)";
}

} // namespace sluice
