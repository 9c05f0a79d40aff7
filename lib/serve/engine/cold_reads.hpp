#pragma once
// Reads parts of files that are not in the page cache on a small pool of threads, so a
// ring's thread never waits for a disk (nginx's "aio threads"). The ring thread checks a
// range with cachestat(2) before sendfile; a range not all cached comes here, is read into
// the page cache (sendfile into /dev/null: no copy; pread into a scratch buffer where that is
// refused), and the ring thread is
// woken (WakeQueue) to sendfile it from the cache. Bounded: a fixed set of threads, a queue.
// The same threads run the fsyncs of uploads stored with --sync, for the same reason.
//
// cachestat counts a page as cached as soon as it is in the page cache, also while the read
// that fills it is still in flight; sendfile on such a page waits for the disk. So the pool
// keeps the ranges it is reading (registered at submit, before any page of them exists, and
// removed once read), and a ring thread that found a range cached asks reading_joined()
// afterwards: a range a pool read still fills is waited for on the pool's side (the ring
// thread is woken with that read), never in sendfile. The other source of such pages, the
// kernel's readahead running past what was asked, is turned off on the served files' fds
// (POSIX_FADV_RANDOM, file_cache.cpp) where this check runs: the pool asks for its whole
// range at once (POSIX_FADV_WILLNEED) instead. Reads by other processes are not seen.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "serve/engine/file_cache.hpp"
#include "serve/engine/shared.hpp"

namespace sluice::serve {

class UploadFile;

// Which file a read is of, across the threads' own fds for it.
struct FileKey {
    uint64_t dev = 0, ino = 0;
    bool operator==(const FileKey&) const = default;
};

struct ColdJob {
    int fd;            // borrowed: the connection keeps it open until the job is done
    uint64_t offset, length;
    WakeQueue* back;   // the ring thread to wake (none: a read ahead, nobody waits for it)
    uint32_t conn, gen;
    UploadFile* commit = nullptr; // set: not a read but an upload's durable commit (--sync)
    FileKey file{};    // a read: the ranges in flight are known by it
    uint64_t id = 0;   // set by submit
    std::shared_ptr<const CachedFile> keep; // a read ahead: keeps fd open (its connection may go first)
};

class ColdReads {
public:
    // null_sink: ranges are waited for by sendfile into /dev/null (probe_null_sink() said it
    // works), else read into a scratch buffer.
    ColdReads(unsigned threads, bool null_sink);
    ~ColdReads(); // finishes the queued jobs, then joins
    void submit(ColdJob job);
    // A read ahead of a connection's position (back == nullptr): submitted unless a read of
    // the same file in flight overlaps it already (16 clients of one file read it once).
    void read_ahead(ColdJob job);
    // Whether [offset, offset+length) of `file` overlaps a read in flight; then the caller
    // (back, conn, gen) is woken when that read ends, as if it were its own (true).
    bool reading_joined(const FileKey& file, uint64_t offset, uint64_t length, WakeQueue* back, uint32_t conn,
                        uint32_t gen);
    // Whether that range overlaps a read in flight, without waiting for it (a get ring seals
    // such a block on its own pool instead of reading it on the ring).
    bool reading(const FileKey& file, uint64_t offset, uint64_t length);

private:
    struct Waiter {
        WakeQueue* back;
        uint32_t conn, gen;
    };
    struct Reading {
        uint64_t id;
        FileKey file;
        uint64_t offset, end;
        std::vector<Waiter> waiters;
    };
    void run();
    // With mu_ held:
    Reading* overlapping(const FileKey& file, uint64_t offset, uint64_t length);
    void register_read(ColdJob& job); // gives it its id; known to reading_joined() from here
    void ended(const ColdJob& job, int err); // wakes the job's connection and its joiners
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<ColdJob> queue_;
    std::vector<Reading> reading_;       // submitted, not yet read (at most one per connection)
    std::atomic<size_t> reading_count_{0}; // lets the warm path skip the lock
    uint64_t next_id_ = 1;
    bool ending_ = false;
    UniqueFd null_; // /dev/null, written by sendfile (shared by the threads; it keeps nothing)
    std::vector<std::thread> threads_;
};

// Whether cachestat(2) (Linux 6.5+) answers here; errno of the refusal otherwise.
int probe_cachestat();
// Whether sendfile from a file into /dev/null works here (0), or its errno.
int probe_null_sink();
// Whether [offset, offset+length) of fd is all in the page cache. On an error (a file
// system that does not say), false: the pool reads it, which is never wrong, only slower.
bool range_cached(int fd, uint64_t offset, uint64_t length);

} // namespace sluice::serve
