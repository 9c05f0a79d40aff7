#pragma once
// The XXH3 of each block of a file, for updates by changed blocks (docs/protocol.md "Updates
// by changed blocks"): both sides hash a whole file this way, so it is the bound of an update.
//
// Through read-only mappings, not pread: profiled on a 4 GiB update with both versions in the
// page cache, 84% of each side's time was the copy from the page cache into the read buffer
// (XXH3 itself 5%). A mapping lets XXH3 read the cached pages where they are. A file truncated
// under the mapping raises SIGBUS on the page past its end: caught (for the mapping being
// hashed on this thread only; any other SIGBUS goes to the disposition there was before) and
// reported as `shrank`. Blocks are split over `threads` threads (each hashes whole blocks).
#include <cstdint>
#include <functional>
#include <vector>

namespace sluice {

struct BlockSumsResult {
    enum class Status {
        hashed,   // sums holds one XXH3-64 per block
        shrank,   // the file ended before `length` while it was read
        no_mmap,  // this file cannot be mapped (mmap refused): hash it through pread instead
        unreadable, // pread failed: error holds its errno
    } status = Status::hashed;
    std::vector<uint64_t> sums;
    int error = 0;
};

// Hashes [base, base + length) of fd in blocks of block_size (the last one shorter). working()
// is called after each block from the thread that hashed it (a keepalive): it must be
// thread-safe.
BlockSumsResult block_sums_mapped(int fd, uint64_t base, uint64_t length, uint64_t block_size, unsigned threads,
                                  const std::function<void()>& working);

// The slower way, for a file that cannot be mapped: each block read in kHashReadBytes pieces
// and hashed, on this thread.
BlockSumsResult block_sums_pread(int fd, uint64_t base, uint64_t length, uint64_t block_size,
                                 const std::function<void()>& working);

// The same through pread into an L2-sized buffer per thread (kHashReadBytes), on `threads`
// threads: for files whose pages are mapped expensively (below).
BlockSumsResult block_sums_read(int fd, uint64_t base, uint64_t length, uint64_t block_size, unsigned threads,
                                const std::function<void()>& working);

// Which of the two is faster for this file. Measured on this VM (2 vCPUs, Linux 6.18, a cached
// 4 GiB file, 2 threads, docs/benchmarks.md "Issue 17 (h17i, session 14)"): through mappings
// 0.12-0.13 s on ext4 and XFS (their page cache holds large folios, mapped many pages at a
// time), 1.0-1.6 s on tmpfs (4 KiB pages, one fault or populate step each), where pread takes
// 0.28 s (0.15-0.21 s on ext4/XFS). So: pread on tmpfs and ramfs, mappings elsewhere.
enum class HashRead { mapped, read };
HashRead hash_read_for(int fd);

// The blocks' sums the faster way for fd (hash_read_for); a file that cannot be mapped is read
// instead and mapped_refused set (for the stats' fallbacks).
BlockSumsResult block_sums(int fd, uint64_t base, uint64_t length, uint64_t block_size, unsigned threads,
                           const std::function<void()>& working, bool& mapped_refused);

// How many threads to hash a file of this many blocks with: one for small files (a thread is
// not worth its start), else the CPUs this process may run on, at most 4.
unsigned hash_threads_for(uint64_t blocks);

} // namespace sluice
