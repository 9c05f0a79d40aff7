#pragma once
// Opening the data streams of a transfer side by side (issue 16): each stream costs about
// two and a half round trips (TCP connect, the receiver's hello, ours and its answer), so
// opening 16 one after the other at 80 ms RTT spent ~3 s before the first byte moved, most
// of the fall-off measured at 16 streams on long links.
#include <functional>
#include <vector>

#include "core/io/unique_fd.hpp"

namespace sluice {

// At most this many handshakes in flight at once: the receiver keeps at most 16 pending
// handshakes per source address (recv/session/acceptor.cpp) and drops one at random beyond
// that, so a sender stays well below it.
inline constexpr unsigned kParallelOpens = 8;

// Runs open(i) for i = 1..count with up to `width` of them at once and returns the streams
// in index order. A stream whose connection was reset during its open is opened again,
// once, after the others and alone. If any other open throws, no new one starts and, once
// all threads have returned, the error of the lowest failing index is thrown (the streams
// opened are closed).
std::vector<UniqueFd> open_streams(unsigned count, unsigned width, const std::function<UniqueFd(unsigned)>& open);

} // namespace sluice
