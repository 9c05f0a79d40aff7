#include "send/session/stream_opener.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

namespace sluice {

std::vector<UniqueFd> open_streams(unsigned count, unsigned width, const std::function<UniqueFd(unsigned)>& open) {
    std::vector<UniqueFd> out(count);
    std::vector<std::exception_ptr> errors(count);
    std::atomic<unsigned> next{0};
    std::atomic<bool> failed{false};
    auto work = [&] {
        for (unsigned i; !failed.load() && (i = next.fetch_add(1)) < count;) {
            try {
                out[i] = open(i + 1);
            } catch (...) {
                errors[i] = std::current_exception();
                failed = true;
            }
        }
    };
    const unsigned threads = std::clamp(width, 1u, std::max(count, 1u));
    {
        std::vector<std::jthread> pool;
        for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
        work(); // this thread is one of them
    }
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    return out;
}

} // namespace sluice
