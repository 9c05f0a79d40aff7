#include "core/checksum/block_sums.hpp"

#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <mutex>
#include <thread>

#include "core/checksum/xxh3.hpp"

namespace sluice {

namespace {

// The mapping this thread is hashing: a SIGBUS inside it is a file truncated meanwhile.
struct Guard {
    const unsigned char* lo;
    const unsigned char* hi;
    sigjmp_buf env;
};
thread_local Guard* t_guard = nullptr;
struct sigaction g_previous {};

void on_sigbus(int sig, siginfo_t* si, void* ctx) {
    Guard* g = t_guard;
    const auto* at = static_cast<const unsigned char*>(si->si_addr);
    if (g && at >= g->lo && at < g->hi) siglongjmp(g->env, 1);
    // Not ours: what the process had before us.
    if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, si, ctx);
    if (!(g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN)
        return g_previous.sa_handler(sig);
    // The default (a core dump): raised again without us, delivered as this handler returns
    // (SIGBUS is blocked inside it); a faulting access would also just run again.
    ::signal(SIGBUS, SIG_DFL);
    ::raise(SIGBUS);
}

void install_sigbus_guard() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGBUS, &sa, &g_previous);
    });
}

enum class One { hashed, shrank, no_mmap };

// XXH3 of [offset, offset + len) through a mapping of it; the volatile locals are what
// siglongjmp may come back to.
One hash_one(int fd, uint64_t offset, uint64_t len, uint64_t& out) {
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t skew = offset % page;
    const size_t map_len = static_cast<size_t>(len + skew);
    // Not MAP_POPULATE: the hash's own faults map the page cache's large folios many pages at
    // a time (fault-around); populating first measured slower (XFS, 2 threads: 0.154 s per
    // cached 4 GiB against 0.120 s; ext4 the same either way; session 14).
    void* p = ::mmap(nullptr, map_len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(offset - skew));
    if (p == MAP_FAILED) return One::no_mmap;
    Guard g{static_cast<const unsigned char*>(p), static_cast<const unsigned char*>(p) + map_len, {}};
    volatile bool done = false;
    volatile uint64_t h = 0;
    if (sigsetjmp(g.env, 1) == 0) {
        t_guard = &g;
        h = xxh3_64(g.lo + skew, static_cast<size_t>(len));
        done = true;
    }
    t_guard = nullptr;
    ::munmap(p, map_len);
    if (!done) return One::shrank;
    out = h;
    return One::hashed;
}

} // namespace

BlockSumsResult block_sums_pread(int fd, uint64_t base, uint64_t length, uint64_t block_size,
                                 const std::function<void()>& working) {
    return block_sums_read(fd, base, length, block_size, 1, working);
}

unsigned hash_threads_for(uint64_t blocks) {
    if (blocks < 8) return 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    unsigned cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<unsigned>(CPU_COUNT(&set)) : 1;
    return std::clamp(cpus, 1u, 4u);
}

namespace {

// Blocks [0, blocks) hashed by `one(i, out)` on `threads` threads, taken in order from a shared
// counter: the threads read neighbouring blocks, which keeps the file's read-ahead sequential.
// The first status other than hashed stops every thread and is returned (with its errno).
template <class One>
BlockSumsResult hash_blocks(uint64_t blocks, unsigned threads, const std::function<void()>& working, One one) {
    BlockSumsResult r;
    r.sums.assign(blocks, 0);
    if (blocks == 0) return r;
    std::atomic<uint64_t> next{0};
    std::atomic<int> status{static_cast<int>(BlockSumsResult::Status::hashed)};
    std::atomic<int> error{0};
    auto run = [&] {
        for (;;) {
            const uint64_t i = next.fetch_add(1);
            if (i >= blocks || status.load() != static_cast<int>(BlockSumsResult::Status::hashed)) return;
            int err = 0;
            const BlockSumsResult::Status o = one(i, r.sums[i], err);
            if (o != BlockSumsResult::Status::hashed) {
                int expected = static_cast<int>(BlockSumsResult::Status::hashed);
                if (status.compare_exchange_strong(expected, static_cast<int>(o))) error.store(err);
                return;
            }
            if (working) working();
        }
    };
    threads = static_cast<unsigned>(std::clamp<uint64_t>(threads, 1, blocks));
    std::vector<std::jthread> helpers;
    for (unsigned t = 1; t < threads; ++t) helpers.emplace_back(run);
    run();
    helpers.clear(); // joins
    r.status = static_cast<BlockSumsResult::Status>(status.load());
    r.error = error.load();
    if (r.status != BlockSumsResult::Status::hashed) r.sums.clear();
    return r;
}

} // namespace

BlockSumsResult block_sums_mapped(int fd, uint64_t base, uint64_t length, uint64_t block_size, unsigned threads,
                                  const std::function<void()>& working) {
    const uint64_t blocks = block_size ? (length + block_size - 1) / block_size : 0;
    if (blocks) install_sigbus_guard();
    return hash_blocks(blocks, threads, working, [&](uint64_t i, uint64_t& out, int&) {
        const uint64_t off = i * block_size;
        switch (hash_one(fd, base + off, std::min(block_size, length - off), out)) {
        case One::hashed: return BlockSumsResult::Status::hashed;
        case One::shrank: return BlockSumsResult::Status::shrank;
        case One::no_mmap: break;
        }
        return BlockSumsResult::Status::no_mmap;
    });
}

BlockSumsResult block_sums_read(int fd, uint64_t base, uint64_t length, uint64_t block_size, unsigned threads,
                                const std::function<void()>& working) {
    const uint64_t blocks = block_size ? (length + block_size - 1) / block_size : 0;
    return hash_blocks(blocks, threads, working, [&](uint64_t i, uint64_t& out, int& err) {
        // One buffer per thread, L2-sized (kHashReadBytes): XXH3 reads what pread just wrote
        // while it is still in the cache.
        thread_local std::vector<unsigned char> buf(kHashReadBytes);
        thread_local Xxh3 h;
        const uint64_t off = i * block_size, len = std::min(block_size, length - off);
        h.reset();
        for (uint64_t done = 0; done < len;) {
            ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), len - done), static_cast<off_t>(base + off + done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                err = errno;
                return BlockSumsResult::Status::unreadable;
            }
            if (n == 0) return BlockSumsResult::Status::shrank;
            h.update(buf.data(), static_cast<size_t>(n));
            done += static_cast<uint64_t>(n);
        }
        out = h.digest();
        return BlockSumsResult::Status::hashed;
    });
}

HashRead hash_read_for(int fd) {
    struct statfs s {};
    if (::fstatfs(fd, &s) != 0) return HashRead::mapped;
    switch (static_cast<unsigned long>(s.f_type)) {
    case TMPFS_MAGIC:
    case RAMFS_MAGIC: return HashRead::read;
    default: return HashRead::mapped;
    }
}

BlockSumsResult block_sums(int fd, uint64_t base, uint64_t length, uint64_t block_size, unsigned threads,
                           const std::function<void()>& working, bool& mapped_refused) {
    if (hash_read_for(fd) == HashRead::read) return block_sums_read(fd, base, length, block_size, threads, working);
    BlockSumsResult r = block_sums_mapped(fd, base, length, block_size, threads, working);
    if (r.status != BlockSumsResult::Status::no_mmap) return r;
    mapped_refused = true;
    return block_sums_read(fd, base, length, block_size, threads, working);
}

} // namespace sluice
