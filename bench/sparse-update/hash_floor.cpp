// Read + XXH3 of a whole cached file, several ways: the floor of an update's sender, which must
// read and hash its whole file (issue 17; docs/benchmarks.md "Issue 17 (h17i, session 14)").
//
//   g++ -O3 -march=native -std=c++20 hash_floor.cpp -o hash_floor -lpthread   (libxxhash-dev)
//   hash_floor FILE HOW THREADS    (CHUNK=bytes in the environment: pread's buffer, default 128 KiB)
//
// HOW: pread (into a per-thread buffer, then XXH3), populate (an 8 MiB MAP_POPULATE mapping per
// block), madv (mapping + MADV_POPULATE_READ), fault (a mapping per block, faulted by the hash),
// whole (one mapping of the file), memonly (XXH3 of one 8 MiB buffer per block: the hash alone,
// from the cache). Blocks of 8 MiB are taken in order by THREADS threads, as sluice does.
// Take the bench lock around it; read the file once first so that it is cached.
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sys/stat.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>
static const size_t B = 8u << 20;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
    const char* path = argv[1]; std::string how = argv[2]; int threads = atoi(argv[3]);
    int fd = open(path, O_RDONLY); struct stat st; fstat(fd, &st); size_t size = st.st_size, blocks = (size + B - 1) / B;
    std::vector<uint64_t> sums(blocks); std::atomic<size_t> next{0};
    unsigned char* whole = nullptr;
    if (how == "whole") whole = (unsigned char*)mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    std::vector<unsigned char> mem; if (how == "memonly") { mem.assign(B, 1); }
    double t0 = now();
    auto run = [&] {
        static const size_t CH = getenv("CHUNK") ? atoi(getenv("CHUNK")) : (128 << 10); std::vector<unsigned char> buf(CH);
        for (;;) {
            size_t i = next++; if (i >= blocks) return; size_t off = i * B, len = std::min(B, size - off);
            if (how == "pread") {
                XXH3_state_t* s = XXH3_createState(); XXH3_64bits_reset(s);
                for (size_t d = 0; d < len;) { ssize_t n = pread(fd, buf.data(), std::min(buf.size(), len - d), off + d); XXH3_64bits_update(s, buf.data(), n); d += n; }
                sums[i] = XXH3_64bits_digest(s); XXH3_freeState(s);
            } else if (how == "populate" || how == "madv" || how == "fault") {
                int fl = MAP_SHARED | (how == "populate" ? MAP_POPULATE : 0);
                void* p = mmap(nullptr, len, PROT_READ, fl, fd, off);
                if (how == "madv") madvise(p, len, 22 /*MADV_POPULATE_READ*/);
                sums[i] = XXH3_64bits(p, len); munmap(p, len);
            } else if (how == "whole") {
                sums[i] = XXH3_64bits(whole + off, len);
            } else if (how == "memonly") {
                sums[i] = XXH3_64bits(mem.data(), len);
            }
        }
    };
    std::vector<std::thread> ts; for (int t = 1; t < threads; ++t) ts.emplace_back(run); run(); for (auto& t : ts) t.join();
    double t1 = now();
    uint64_t x = 0; for (auto s : sums) x ^= s;
    printf("%-9s threads=%d %.3f s  %.2f GB/s  (xor %016llx)\n", how.c_str(), threads, t1 - t0, size / (t1 - t0) / 1e9, (unsigned long long)x);
}
