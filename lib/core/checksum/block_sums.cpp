#include "core/checksum/block_sums.hpp"

#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
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
    void* p = ::mmap(nullptr, map_len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, static_cast<off_t>(offset - skew));
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
    BlockSumsResult r;
    std::vector<unsigned char> buf(std::min<uint64_t>(block_size, kHashReadBytes));
    Xxh3 h;
    for (uint64_t off = 0; off < length; off += block_size) {
        const uint64_t len = std::min(block_size, length - off);
        h.reset();
        for (uint64_t done = 0; done < len;) {
            ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), len - done), static_cast<off_t>(base + off + done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return {.status = BlockSumsResult::Status::unreadable, .sums = {}, .error = errno};
            if (n == 0) return {.status = BlockSumsResult::Status::shrank, .sums = {}};
            h.update(buf.data(), static_cast<size_t>(n));
            done += static_cast<uint64_t>(n);
        }
        r.sums.push_back(h.digest());
        if (working) working();
    }
    return r;
}

unsigned hash_threads_for(uint64_t blocks) {
    if (blocks < 8) return 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    unsigned cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<unsigned>(CPU_COUNT(&set)) : 1;
    return std::clamp(cpus, 1u, 4u);
}

BlockSumsResult block_sums_mapped(int fd, uint64_t base, uint64_t length, uint64_t block_size, unsigned threads,
                                  const std::function<void()>& working) {
    BlockSumsResult r;
    const uint64_t blocks = block_size ? (length + block_size - 1) / block_size : 0;
    r.sums.assign(blocks, 0);
    if (blocks == 0) return r;
    install_sigbus_guard();
    std::atomic<uint64_t> next{0};
    std::atomic<int> status{static_cast<int>(One::hashed)};
    // Blocks are taken in order from a shared counter: the threads read neighbouring blocks,
    // which keeps the file's read-ahead sequential.
    auto run = [&] {
        for (;;) {
            const uint64_t i = next.fetch_add(1);
            if (i >= blocks || status.load() != static_cast<int>(One::hashed)) return;
            const uint64_t off = i * block_size;
            const One o = hash_one(fd, base + off, std::min(block_size, length - off), r.sums[i]);
            if (o != One::hashed) {
                int expected = static_cast<int>(One::hashed);
                status.compare_exchange_strong(expected, static_cast<int>(o));
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
    switch (static_cast<One>(status.load())) {
    case One::hashed: break;
    case One::shrank: r.status = BlockSumsResult::Status::shrank; break;
    case One::no_mmap: r.status = BlockSumsResult::Status::no_mmap; break;
    }
    if (r.status != BlockSumsResult::Status::hashed) r.sums.clear();
    return r;
}

} // namespace sluice
