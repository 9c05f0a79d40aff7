// The floor of an update's walk on this machine: what reading every entry of a tree costs
// with nothing else done (no manifest, no strings kept, one thread), for a sluice update of
// the same tree to be measured against. For each DIR: getdents + fstatat per entry (the
// receiver's quick check does as much on its side), then the same with listxattrat too (the
// sender's walk as root), ROUNDS times each; prints each round's milliseconds and the median.
//   walk_floor ROUNDS DIR...
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

long entries = 0;

void walk(int dfd, bool xattrs) {
    DIR* d = fdopendir(dfd);
    if (!d) { std::perror("fdopendir"); std::exit(1); }
    char names[4096];
    while (dirent* e = readdir(d)) {
        if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) { std::perror(e->d_name); std::exit(1); }
        if (xattrs) syscall(465 /* listxattrat, x86-64 */, dirfd(d), e->d_name, AT_SYMLINK_NOFOLLOW, names, sizeof names);
        ++entries;
        if (S_ISDIR(st.st_mode)) walk(openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC), xattrs);
    }
    closedir(d);
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) { std::fprintf(stderr, "usage: walk_floor ROUNDS DIR...\n"); return 2; }
    const int rounds = std::atoi(argv[1]);
    for (int a = 2; a < argc; ++a) {
        for (bool xattrs : {false, true}) {
            std::vector<double> ms;
            for (int r = 0; r < rounds; ++r) {
                entries = 0;
                auto t0 = std::chrono::steady_clock::now();
                walk(open(argv[a], O_RDONLY | O_DIRECTORY | O_CLOEXEC), xattrs);
                ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            }
            std::printf("%s: %ld entries, %s:", argv[a], entries, xattrs ? "fstatat + listxattrat" : "fstatat");
            for (double m : ms) std::printf(" %.1f", m);
            std::sort(ms.begin(), ms.end());
            std::printf(" ms; median %.1f ms\n", ms[ms.size() / 2]);
        }
    }
}
