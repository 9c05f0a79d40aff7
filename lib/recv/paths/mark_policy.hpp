#pragma once
// How large one data stream's low-water mark may be (marked_wait.hpp), learned from the
// stream itself. Issue 16: a fixed mark (the rest of the frame, up to 1 MiB and a quarter of
// the receive buffer) held one stream at 150 ms with 5% loss to 5.9-9.6 Mbit/s where no mark
// moved 166.6 (h16j). Measured (h16k): no marked wait ended by its deadline; the receive
// buffer's autotuning stalled instead (rcv_space 90 KB for 2 s, 240 KB for 4 s): with loss a
// hole is nearly always open, the bytes after it do not count toward the mark, the reader
// sleeps while in-order bytes wait in the buffer, the window the kernel offers shrinks by
// them, the sender's delivery rate and BBR's estimate stay low, and the kernel, which grows
// the buffer with what the reader takes per round trip, does not grow it.
// So the cap of each mark follows two signals, both cheap and both per stream:
// Pure logic (no system calls): the unit test drives it.
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace sluice {

// What a stream's marks did, for the stats and -v (summed over the streams).
struct MarkCounts {
    uint64_t deadlines = 0;         // marked waits ended by their deadline
    uint64_t given_up = 0;          // times a stream's cap fell below kMin: no mark from then
    uint64_t unmarked_for_loss = 0; // receives left unmarked because out-of-order data arrived
};

// The sums over a receiver's streams (RecvContext::marks), added once as each stream's wait ends.
struct MarkTally {
    std::atomic<uint64_t> deadlines{0}, given_up{0}, unmarked_for_loss{0};
    void add(const MarkCounts& c) noexcept {
        deadlines += c.deadlines;
        given_up += c.given_up;
        unmarked_for_loss += c.unmarked_for_loss;
    }
};

class MarkPolicy {
public:
    static constexpr size_t kMax = size_t{1} << 20;  // the largest mark (RecvLowWater's cap)
    static constexpr size_t kMin = size_t{64} << 10; // a smaller one is not worth a system call
    static constexpr unsigned kRegrow = 8;           // marks met in a row before the cap doubles
    // Receives in a row without new out-of-order packets before marks return. One is not
    // enough: the receive that takes the burst a filled hole releases is often the first to
    // see no new ones while the next hole is already open (h16k, 48 MiB at 150 ms and 5%
    // loss, one stream: 28 Mbit/s with one, 50 with 16, 18 with the fixed mark).
    static constexpr unsigned kQuiet = 16;

    // The cap of the next receive's mark (0: none). ooo: the stream's count of out-of-order
    // packets so far (tcpi_rcv_ooopack; a constant where the kernel lacks it).
    size_t cap(uint32_t ooo) noexcept {
        if (ooo != ooo_) {
            ooo_ = ooo;
            quiet_ = 0;
        }
        if (quiet_ < kQuiet) {
            ++quiet_;
            ++counts_.unmarked_for_loss;
            return 0;
        }
        return cap_;
    }
    // A marked wait ended by its deadline.
    void deadline() noexcept {
        ++counts_.deadlines;
        met_ = 0;
        if (cap_ == 0) return;
        cap_ /= 2;
        if (cap_ < kMin) {
            cap_ = 0;
            ++counts_.given_up;
        }
    }
    // A receive returned n bytes (not by a deadline); marked: it waited under a mark, which
    // it met (or the stream ended).
    void received(size_t n, bool marked) noexcept {
        if (marked) {
            if (++met_ >= kRegrow && cap_ != 0 && cap_ < kMax) {
                cap_ *= 2;
                met_ = 0;
            }
            return;
        }
        if (cap_ == 0 && n >= kMin) cap_ = kMin;
    }
    size_t current_cap() const noexcept { return cap_; }
    const MarkCounts& counts() const noexcept { return counts_; }

private:
    size_t cap_ = kMax;
    uint32_t ooo_ = 0;
    unsigned quiet_ = kQuiet; // marks from the start: a stream is not lossy until it shows it
    unsigned met_ = 0;
    MarkCounts counts_;
};

} // namespace sluice
