#pragma once
// The checksums of get sessions on the ring (serve/get/ring_gets): XXH3-64 of a block's bytes
// (and for an encrypted session the block's records sealed: SealedBlock), read by a few
// threads of their own so that neither the hash nor a cold page ever holds the
// ring thread. Reading the block here also brings it into the page cache, so the ring's
// sendfile of it afterwards finds it there. A finished job is queued and the ring woken
// through an eventfd it reads.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "serve/get/sealed_block.hpp"

namespace sluice::serve {

struct SumJob {
    uint32_t session = 0; // the ring's slot and its generation: a late result for a freed one is dropped
    uint32_t gen = 0;
    int fd = -1;          // borrowed: the session waits for its jobs before it closes the file
    uint64_t offset = 0, length = 0;
    uint64_t sum = 0;     // out: XXH3-64 of the bytes
    int err = 0;          // out: errno of a failed read, or EIO for a file that got shorter
    // An encrypted session's block: read into this data stream's records, summed and sealed
    // there (SealedBlock::fill) instead of only summed. The session waits for the job before
    // it frees the buffer.
    SealedBlock* seal = nullptr;
    uint16_t link = 0; // which of the session's connections it is for
};

class SumPool {
public:
    explicit SumPool(unsigned threads);
    ~SumPool(); // ends the threads; jobs not started are dropped
    SumPool(const SumPool&) = delete;
    SumPool& operator=(const SumPool&) = delete;
    int wake_fd() const { return efd_.get(); }
    void push(const SumJob& j);
    void take(std::vector<SumJob>& out); // finished jobs, in any order

private:
    void work();
    UniqueFd efd_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<SumJob> todo_;
    std::vector<SumJob> done_;
    bool ending_ = false;
    std::vector<std::thread> threads_;
};

} // namespace sluice::serve
