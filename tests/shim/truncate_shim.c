// Test-only LD_PRELOAD shim: truncates a file at a known point of a transfer, so that a
// "source truncated while it is sent" test does not depend on timing.
//
// When the process maps (mmap) or reads (pread) a regular file whose path contains
// $SLUICE_TEST_TRUNCATE_MATCH at a file offset >= $SLUICE_TEST_TRUNCATE_AT, the file is
// truncated to $SLUICE_TEST_TRUNCATE_TO bytes (default 0) once per value of MATCH (a process
// that sets it again with setenv re-arms the shim), just before the call goes
// through, and "sluice-test-shim: truncated PATH" is written to standard error. That is the
// moment a checksum starts reading a block: exactly the window logrotate's copytruncate can
// hit. Every other call passes through untouched.
//
// With $SLUICE_TEST_TRUNCATE_WHEN=after, the file is truncated instead just after a pread of
// it returns whose range ends at or beyond AT: the last read of a block's checksum, so the
// checksum is of the whole block and the data path (splice, sendfile, read) is the one that
// meets the shorter file.
// Both the plain and the 64 names are defined below: keep the headers from redirecting one
// to the other (on 64-bit Linux off_t is 64 bits either way).
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// The MATCH string the shim last fired for (glibc's setenv never frees an old value, so a
// new setenv is a new pointer).
static _Atomic(const char*) fired_for;

static int after_mode(void) {
    const char* when = getenv("SLUICE_TEST_TRUNCATE_WHEN");
    return when && strcmp(when, "after") == 0;
}

static void maybe_truncate(int fd, off_t offset) {
    if (fd < 0) return;
    const char* match = getenv("SLUICE_TEST_TRUNCATE_MATCH");
    if (!match || !*match || atomic_load(&fired_for) == match) return;
    const char* at = getenv("SLUICE_TEST_TRUNCATE_AT");
    if (offset < (at ? atoll(at) : 0)) return;
    char link[64];
    char target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return;
    target[n] = '\0';
    if (!strstr(target, match)) return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (atomic_exchange(&fired_for, match) == match) return;
    const char* to = getenv("SLUICE_TEST_TRUNCATE_TO");
    if (truncate(link, to ? atoll(to) : 0) != 0) {
        perror("sluice-test-shim: truncate");
        return;
    }
    char msg[4200];
    int len = snprintf(msg, sizeof msg, "sluice-test-shim: truncated %s\n", target);
    if (len > 0) (void)!write(2, msg, (size_t)len);
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

typedef void* (*mmap_fn)(void*, size_t, int, int, int, off_t);
typedef ssize_t (*pread_fn)(int, void*, size_t, off_t);

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (!after_mode()) maybe_truncate(fd, off);
    return REAL("mmap", mmap_fn)(addr, len, prot, flags, fd, off);
}
void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (!after_mode()) maybe_truncate(fd, off);
    return REAL("mmap64", mmap_fn)(addr, len, prot, flags, fd, off);
}
static ssize_t pread_through(const char* name, int fd, void* buf, size_t len, off_t off) {
    if (!after_mode()) maybe_truncate(fd, off);
    ssize_t n = REAL(name, pread_fn)(fd, buf, len, off);
    if (after_mode() && n > 0) maybe_truncate(fd, off + n);
    return n;
}
ssize_t pread(int fd, void* buf, size_t len, off_t off) { return pread_through("pread", fd, buf, len, off); }
ssize_t pread64(int fd, void* buf, size_t len, off_t off) { return pread_through("pread64", fd, buf, len, off); }
