#include "send/session/stream_opener.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <thread>

#include "sluice/error.hpp"

namespace sluice {

std::vector<UniqueFd> open_streams(unsigned count, unsigned width, const std::function<UniqueFd(unsigned)>& open) {
    std::vector<UniqueFd> out(count);
    std::vector<std::exception_ptr> errors(count);
    std::vector<bool> again(count, false); // failed on the network: opened once more, alone
    std::atomic<unsigned> next{0};
    std::atomic<bool> failed{false};
    auto work = [&] {
        for (unsigned i; !failed.load() && (i = next.fetch_add(1)) < count;) {
            try {
                out[i] = open(i + 1);
            } catch (const Error& e) {
                // A receiver under a flood of connections from our address drops pending
                // handshakes at random, our own side-by-side ones included (acceptor.cpp):
                // such a stream is opened again after the others, one at a time as before.
                // Dropped is a reset or an end of file, whichever the close met.
                if (e.code() == ErrorCode::network &&
                    (e.cause() == ErrorCause::peer_reset || e.cause() == ErrorCause::peer_closed)) {
                    again[i] = true;
                    continue;
                }
                errors[i] = std::current_exception();
                failed = true;
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
    for (unsigned i = 0; i < count; ++i)
        if (again[i]) out[i] = open(i + 1);
    return out;
}

} // namespace sluice
