#include "serve/get/session_threads.hpp"

#include <system_error>

namespace sluice::serve {

bool SessionThreads::start(Asked& a) {
    auto one = std::make_unique<One>();
    One* raw = one.get();
    try {
        raw->thread = std::thread([this, raw, b = std::move(a)]() mutable {
            serve_get_session(sh_, att_, std::move(b), raw->cancel);
            raw->done.store(true);
        });
    } catch (const std::system_error&) {
        return false; // the lambda, and the connection it took, are gone
    }
    list_.push_back(std::move(one));
    return true;
}

void SessionThreads::reap() {
    for (auto it = list_.begin(); it != list_.end();) {
        if ((*it)->done.load()) {
            (*it)->thread.join();
            it = list_.erase(it);
        } else {
            ++it;
        }
    }
}

void SessionThreads::stop() {
    for (auto& o : list_) o->cancel.store(true);
    for (auto& o : list_)
        if (o->thread.joinable()) o->thread.join();
    list_.clear();
}

} // namespace sluice::serve
