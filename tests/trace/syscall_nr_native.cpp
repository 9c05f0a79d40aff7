// bpf/syscall_nr.h for the architecture being built (meson passes its __TARGET_ARCH_ macro),
// checked at compile time against this system's own <sys/syscall.h> and <fcntl.h>: if the
// probe's numbers were wrong, this file would not compile.
#include "syscall_nr.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define SAME(name) static_assert(SL_NR_##name == SYS_##name, #name)
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
// The ones only some architectures have: defined in the table exactly when the system has them.
#if defined(SYS_open) != defined(SL_NR_open) || defined(SYS_creat) != defined(SL_NR_creat) ||                                    \
    defined(SYS_pipe) != defined(SL_NR_pipe) || defined(SYS_dup2) != defined(SL_NR_dup2)
#error "syscall_nr.h lists open/creat/pipe/dup2 for an architecture that lacks them, or misses them"
#endif
#ifdef SYS_open
SAME(open);
SAME(creat);
SAME(pipe);
SAME(dup2);
#endif
#undef SAME

static_assert(SL_O_DIRECT == O_DIRECT);
static_assert(SL_O_ACCMODE == O_ACCMODE && SL_O_CREAT == O_CREAT && SL_O_WRONLY == O_WRONLY && SL_O_TRUNC == O_TRUNC);
static_assert(SL_O_CLOEXEC == O_CLOEXEC && SL_MFD_CLOEXEC == MFD_CLOEXEC && SL_FD_CLOEXEC == FD_CLOEXEC);
static_assert(SL_F_DUPFD == F_DUPFD && SL_F_SETFD == F_SETFD && SL_F_SETFL == F_SETFL && SL_F_DUPFD_CLOEXEC == F_DUPFD_CLOEXEC);
static_assert(SL_FIOCLEX == FIOCLEX && SL_FIONCLEX == FIONCLEX);
static_assert(SL_CLOSE_RANGE_CLOEXEC == CLOSE_RANGE_CLOEXEC && SL_AT_FDCWD == AT_FDCWD);

int main() { return 0; }
