#pragma once
// The checksums of get sessions on the ring (serve/get/ring_gets): XXH3-64 of a block's bytes
// (and for an encrypted session the block's records sealed: SealedBlock), read by a few
// threads of their own so that neither the hash nor a cold page ever holds the
// ring thread. Reading the block here also brings it into the page cache, so the ring's
// sendfile of it afterwards finds it there. A finished job is queued and the ring woken
// through an eventfd it reads.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "serve/engine/cold_reads.hpp"
#include "serve/get/sealed_block.hpp"

namespace sluice::serve {

struct SumJob {
    uint32_t session = 0; // the ring's slot and its generation: a late result for a freed one is dropped
    uint32_t gen = 0;
    int fd = -1;          // borrowed: the session waits for its jobs before it closes the file
    FileKey file{};       // which file fd is: the range is known to reading() while it is read
    uint64_t offset = 0, length = 0;
    uint64_t sum = 0;     // out: XXH3-64 of the bytes
    int err = 0;          // out: errno of a failed read, or EIO for a file that got shorter
    // An encrypted session's block: read into this data stream's records, summed and sealed
    // there (SealedBlock::fill) instead of only summed. The session waits for the job before
    // it frees the buffer.
    SealedBlock* seal = nullptr;
    uint16_t link = 0; // which of the session's connections it is for
    uint32_t entry = 0; // which of the session's files (its manifest file_id)
};

// The ranges of files being read (not thread-safe: the SumPool's lock guards it).
class ReadsInFlight {
public:
    void add(const FileKey& file, uint64_t offset, uint64_t length) { r_.push_back(Range{file, offset, offset + length}); }
    void remove(const FileKey& file, uint64_t offset, uint64_t length); // one of the equal ranges added
    bool overlaps(const FileKey& file, uint64_t offset, uint64_t length) const;
    size_t size() const { return r_.size(); }

private:
    struct Range {
        FileKey file;
        uint64_t offset, end;
    };
    std::vector<Range> r_; // at most one per data stream of the ring's sessions: a scan is short
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
    // Whether [offset, offset+length) of file overlaps a job pushed and not yet finished.
    bool reading(const FileKey& file, uint64_t offset, uint64_t length);
    // Other work that may wait for the disk (a tree's walk): fn runs on a pool thread, and
    // its tag comes back from take_tasks() once it has run (the same eventfd wakes the ring).
    // The caller keeps what fn refers to alive until then.
    void post(uint64_t tag, std::function<void()> fn);
    void take_tasks(std::vector<uint64_t>& out);

private:
    void work();
    UniqueFd efd_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<SumJob> todo_;
    std::vector<SumJob> done_;
    std::deque<std::pair<uint64_t, std::function<void()>>> tasks_;
    std::vector<uint64_t> tasks_done_;
    ReadsInFlight reading_;                  // pushed, not yet finished
    std::atomic<size_t> reading_count_{0};   // lets a ring's cached block skip the lock
    bool ending_ = false;
    std::vector<std::thread> threads_;
};

} // namespace sluice::serve
