#pragma once
// Reads parts of files that are not in the page cache on a small pool of threads, so a
// ring's thread never waits for a disk (nginx's "aio threads"). The ring thread checks a
// range with cachestat(2) before sendfile; a range not all cached comes here, is read into
// the page cache (pread into a scratch buffer the pool thread keeps), and the ring thread is
// woken (WakeQueue) to sendfile it from the cache. Bounded: a fixed set of threads, a queue.
// The same threads run the fsyncs of uploads stored with --sync, for the same reason.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/engine/shared.hpp"

namespace sluice::serve {

class UploadFile;

struct ColdJob {
    int fd;            // borrowed: the connection keeps it open until the job is done
    uint64_t offset, length;
    WakeQueue* back;   // the ring thread to wake
    uint32_t conn, gen;
    UploadFile* commit = nullptr; // set: not a read but an upload's durable commit (--sync)
};

class ColdReads {
public:
    explicit ColdReads(unsigned threads);
    ~ColdReads(); // finishes the queued jobs, then joins
    void submit(const ColdJob& job);

private:
    void run();
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<ColdJob> queue_;
    bool ending_ = false;
    std::vector<std::thread> threads_;
};

// Whether cachestat(2) (Linux 6.5+) answers here; errno of the refusal otherwise.
int probe_cachestat();
// Whether [offset, offset+length) of fd is all in the page cache. On an error (a file
// system that does not say), false: the pool reads it, which is never wrong, only slower.
bool range_cached(int fd, uint64_t offset, uint64_t length);

} // namespace sluice::serve
