/* Syscall numbers and the few flag values that differ between the architectures the probe is
 * built for, chosen by the CO-RE arch macro (-D__TARGET_ARCH_x86 or -D__TARGET_ARCH_arm64).
 * Plain macros, so tests/trace/syscall_nr_test.cpp can check them against the system headers
 * (x86_64: <asm/unistd_64.h>; arm64 uses the generic table, <asm-generic/unistd.h>).
 * An SL_NR_ that an architecture lacks (arm64 has no open, creat, pipe or dup2) is not defined. */
#ifndef SLUICE_TRACE_SYSCALL_NR_H
#define SLUICE_TRACE_SYSCALL_NR_H

#if defined(__TARGET_ARCH_x86)

#define SL_NR_read 0
#define SL_NR_write 1
#define SL_NR_open 2
#define SL_NR_close 3
#define SL_NR_ioctl 16
#define SL_NR_pread64 17
#define SL_NR_pwrite64 18
#define SL_NR_readv 19
#define SL_NR_writev 20
#define SL_NR_pipe 22
#define SL_NR_dup 32
#define SL_NR_dup2 33
#define SL_NR_sendfile 40
#define SL_NR_socket 41
#define SL_NR_accept 43
#define SL_NR_sendto 44
#define SL_NR_recvfrom 45
#define SL_NR_sendmsg 46
#define SL_NR_recvmsg 47
#define SL_NR_socketpair 53
#define SL_NR_fcntl 72
#define SL_NR_chdir 80
#define SL_NR_fchdir 81
#define SL_NR_creat 85
#define SL_NR_openat 257
#define SL_NR_splice 275
#define SL_NR_tee 276
#define SL_NR_vmsplice 278
#define SL_NR_accept4 288
#define SL_NR_dup3 292
#define SL_NR_pipe2 293
#define SL_NR_preadv 295
#define SL_NR_pwritev 296
#define SL_NR_recvmmsg 299
#define SL_NR_sendmmsg 307
#define SL_NR_memfd_create 319
#define SL_NR_copy_file_range 326
#define SL_NR_preadv2 327
#define SL_NR_pwritev2 328
#define SL_NR_close_range 436
#define SL_NR_openat2 437

#define SL_O_DIRECT 040000

#elif defined(__TARGET_ARCH_arm64)

#define SL_NR_dup 23
#define SL_NR_dup3 24
#define SL_NR_fcntl 25
#define SL_NR_ioctl 29
#define SL_NR_chdir 49
#define SL_NR_fchdir 50
#define SL_NR_openat 56
#define SL_NR_close 57
#define SL_NR_pipe2 59
#define SL_NR_read 63
#define SL_NR_write 64
#define SL_NR_readv 65
#define SL_NR_writev 66
#define SL_NR_pread64 67
#define SL_NR_pwrite64 68
#define SL_NR_preadv 69
#define SL_NR_pwritev 70
#define SL_NR_sendfile 71
#define SL_NR_vmsplice 75
#define SL_NR_splice 76
#define SL_NR_tee 77
#define SL_NR_socket 198
#define SL_NR_socketpair 199
#define SL_NR_accept 202
#define SL_NR_sendto 206
#define SL_NR_recvfrom 207
#define SL_NR_sendmsg 211
#define SL_NR_recvmsg 212
#define SL_NR_accept4 242
#define SL_NR_recvmmsg 243
#define SL_NR_sendmmsg 269
#define SL_NR_memfd_create 279
#define SL_NR_copy_file_range 285
#define SL_NR_preadv2 286
#define SL_NR_pwritev2 287
#define SL_NR_close_range 436
#define SL_NR_openat2 437

#define SL_O_DIRECT 0200000 /* arm64's own; 040000 is O_DIRECTORY there */

#else
#error "sluice trace: no syscall table for this architecture (add one to syscall_nr.h)"
#endif

/* The same on x86_64 and arm64 (asm-generic values). */
#define SL_O_ACCMODE 03
#define SL_O_CREAT 0100
#define SL_O_WRONLY 01
#define SL_O_TRUNC 01000
#define SL_O_CLOEXEC 02000000 /* also SOCK_CLOEXEC */
#define SL_MFD_CLOEXEC 1
#define SL_FD_CLOEXEC 1
#define SL_F_DUPFD 0
#define SL_F_SETFD 2
#define SL_F_SETFL 4
#define SL_F_DUPFD_CLOEXEC 1030
#define SL_FIONCLEX 0x5450
#define SL_FIOCLEX 0x5451
#define SL_CLOSE_RANGE_CLOEXEC 4
#define SL_AT_FDCWD (-100)

#endif
