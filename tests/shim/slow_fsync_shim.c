// Test-only LD_PRELOAD shim: makes fsync and fdatasync take at least $SLUICE_TEST_FSYNC_DELAY_MS
// milliseconds each (then does the real call), so that a test can give the receiver's own work
// (registering a page of empty files with --sync) a known minimum length on any disk, fast or
// slow, without touching the product. With the variable unset every call passes through.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static void delay(void) {
    const char* ms = getenv("SLUICE_TEST_FSYNC_DELAY_MS");
    if (!ms) return;
    long n = strtol(ms, NULL, 10);
    if (n <= 0) return;
    struct timespec t = {.tv_sec = n / 1000, .tv_nsec = (n % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    delay();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    delay();
    return real(fd);
}
