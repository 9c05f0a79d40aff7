// bpf/syscall_nr.h's arm64 table, checked at compile time on any build machine: arm64 has no
// syscall table of its own and uses the generic one, <asm-generic/unistd.h>, which every
// linux-libc-dev installs. (arm64's own O_DIRECT, 0200000, is in a header only arm64 installs.)
#define __TARGET_ARCH_arm64
#include "syscall_nr.h"

#include <asm-generic/unistd.h>

#define SAME(name) static_assert(SL_NR_##name == __NR_##name, #name)
SAME(read);
SAME(write);
SAME(close);
SAME(ioctl);
SAME(pread64);
SAME(pwrite64);
SAME(readv);
SAME(writev);
SAME(dup);
SAME(dup3);
SAME(sendfile);
SAME(socket);
SAME(accept);
SAME(accept4);
SAME(sendto);
SAME(recvfrom);
SAME(sendmsg);
SAME(recvmsg);
SAME(socketpair);
SAME(fcntl);
SAME(openat);
SAME(openat2);
SAME(splice);
SAME(tee);
SAME(vmsplice);
SAME(pipe2);
SAME(preadv);
SAME(pwritev);
SAME(recvmmsg);
SAME(sendmmsg);
SAME(memfd_create);
SAME(copy_file_range);
SAME(preadv2);
SAME(pwritev2);
SAME(close_range);
SAME(chdir);
SAME(fchdir);
#undef SAME
#if defined(SL_NR_open) || defined(SL_NR_creat) || defined(SL_NR_pipe) || defined(SL_NR_dup2)
#error "arm64 has no open, creat, pipe or dup2"
#endif

int main() { return 0; }
