/* The one contract between the BPF programs (bpf/: trace.bpf.c and its .bpf.h pieces) and the loader (the C++ in this
 * directory): map keys and values and ring buffer events. Nothing else crosses.
 * Plain C with __u32-style types: vmlinux.h provides them in BPF, <linux/types.h> in user space.
 * Every name is prefixed sl_/SL_ because 6.18's vmlinux.h already defines many short names.
 * Nothing here depends on the architecture: syscall numbers stay inside the BPF side
 * (bpf/syscall_nr.h), which reports operations as enum sl_op. */
#ifndef SLUICE_TRACE_TRACE_H
#define SLUICE_TRACE_TRACE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* What an fd is. The kernel-reads probe reads it from the inode; the no-kernel-reads probe knows
 * it from the syscall that created the fd, and otherwise leaves it SL_CLS_UNKNOWN with an id
 * that user space resolves (open path, or /proc/PID/fd/N). */
enum sl_fd_class {
    SL_CLS_UNKNOWN = 0,
    SL_CLS_FILE = 1, /* regular file or block device: the page cache */
    SL_CLS_PIPE = 2,
    SL_CLS_SOCKET = 3,
    SL_CLS_DEVNULL = 4,    /* char 1:3 — writes are discarded, no data moves */
    SL_CLS_DEVZERO = 5,    /* char 1:5 — reads are zero fill, no data moves */
    SL_CLS_OTHER = 6,      /* tty, eventfd, other char devices, anon inodes */
    SL_CLS_NONE = 7,       /* the operation has no second fd (the other side is user memory) */
    SL_CLS_UNRESOLVED = 8, /* user space could not resolve it (fd closed or process gone) */
    SL_CLS_FIXED = 9,      /* io_uring registered (fixed) file, not resolvable without kernel reads */
    SL_CLS_COUNT = 10,
};

/* Syscalls that move bytes, whatever their number on this architecture. */
enum sl_op {
    SL_OP_READ = 1,
    SL_OP_WRITE,
    SL_OP_PREAD64,
    SL_OP_PWRITE64,
    SL_OP_READV,
    SL_OP_WRITEV,
    SL_OP_PREADV,
    SL_OP_PWRITEV,
    SL_OP_PREADV2,
    SL_OP_PWRITEV2,
    SL_OP_SENDTO,
    SL_OP_RECVFROM,
    SL_OP_SENDMSG,
    SL_OP_RECVMSG,
    SL_OP_SENDMMSG,
    SL_OP_RECVMMSG,
    SL_OP_SENDFILE,
    SL_OP_SPLICE,
    SL_OP_TEE,
    SL_OP_VMSPLICE,
    SL_OP_COPY_FILE_RANGE,
    SL_OP_SYSCALL_END,
};
/* io_uring requests: op is SL_OP_URING | IORING_OP_*. */
#define SL_OP_URING 0x8000

/* vmsplice direction travels in the flags byte: it decides copy vs. page pinning. */
#define SL_FLAG_FD_WRITABLE 0x1
/* The first fd was opened with O_DIRECT: its file reads and writes are the device's DMA, not
 * CPU copies between user and kernel memory. */
#define SL_FLAG_FD_DIRECT 0x2

/* One counter per (process, operation, classes of the two fds). A side whose class the probe
 * knows has id 0, so all fds of a class share one counter; a side it does not know carries the
 * id of that fd's incarnation (an open file, as one process sees it), which an
 * SL_EV_FD_SEEN or SL_EV_FD_OPEN event told user space how to resolve. */
struct sl_flow_key {
    __u32 tgid;
    __u16 op;
    __u8 cls_a; /* the fd the syscall names first (source for read/splice/sendfile) */
    __u8 cls_b; /* the second fd (splice/sendfile/copy_file_range/tee destination) */
    __u32 id_a;
    __u32 id_b;
    __u8 flags; /* SL_FLAG_FD_*, of the first fd */
    __u8 pad[3];
};

struct sl_flow_val {
    __u64 bytes;
    __u64 calls;
    __u64 errors;
};

/* Per process (thread group). */
struct sl_proc_val {
    __u64 syscalls;
    __u64 cpu_ns;   /* on-CPU time from sched_switch, all threads */
    __u64 nvcsw;    /* voluntary context switches (blocked) */
    __u64 nivcsw;   /* involuntary (preempted while runnable) */
    __u64 utime_ns; /* task_struct utime/stime summed at thread exit (kernel reads only) */
    __u64 stime_ns;
    __u64 sum_exec_ns;     /* task_struct se.sum_exec_runtime at thread exit (kernel reads only) */
    __u64 zc_notif;        /* io_uring SEND_ZC notifications */
    __u64 zc_notif_copied; /* ... that said the kernel copied the data anyway */
    __u32 ppid;
    __u16 pad;
    __u8 exited;
    __u8 wait_exec; /* set by user space for a command it forked: count nothing before exec */
    char comm[16];
};

/* Per thread, so io_uring workers (iou-wrk-*, iou-sqp-*) show up next to the process they serve. */
struct sl_thread_val {
    __u32 tgid;
    __u32 pad;
    __u64 cpu_ns;
    __u64 last_in_ns; /* when it was last switched in; 0 when off CPU */
    char comm[16];
};

/* The no-kernel-reads probe's fd tables: per traced process, what each fd is, the way the
 * kernel keeps its own (copied at fork, close-on-exec fds dropped at exec). */
struct sl_fd_key {
    __u32 tgid;
    __s32 fd;
};

/* sl_fd_val.flags, besides SL_FLAG_FD_WRITABLE and SL_FLAG_FD_DIRECT: */
#define SL_FDF_CLOEXEC 0x10   /* close-on-exec (also a hint on a slot not yet seen) */
#define SL_FDF_UNTRACKED 0x20 /* not seen created: class from /proc; exec drops it (cloexec unknown) */
#define SL_FDF_LIVE 0x40      /* the probe knows this fd: cls, or id for user space to resolve */
#define SL_FDF_GONE 0x80      /* closed since tracing started: no start-of-trace seed applies */
/* A slot with neither LIVE nor GONE has not been seen: the fd, if any, is one the process had
 * when tracing started, which user space described in the "seeds" map. */

struct sl_fd_val {
    __u32 id;   /* 0 when cls is known; otherwise what user space resolves */
    __u8 cls;   /* enum sl_fd_class */
    __u8 flags; /* SL_FLAG_FD_* | SL_FDF_* */
    __u16 pad;
};

/* fds below this have a slot in the process's table; higher ones (a server's sockets) live in
 * a hash map that a fork or exec invalidates, so they may fall back to /proc after those. */
#define SL_FD_SLOTS 1024

/* Map "fdtabs": tgid -> table. */
struct sl_fd_table {
    __u32 root;  /* the tracked process whose start-of-trace fds (seeds) this one inherited */
    __u32 execs; /* execs since then: a close-on-exec seed no longer applies */
    __u32 inc;   /* incarnation of this process's high-fd entries */
    __u32 pad;
    struct sl_fd_val fd[SL_FD_SLOTS];
};

/* Map "seeds": (tracked tgid, fd) -> sl_fd_val: what /proc said when tracing started. User
 * space writes it; the probe deletes an entry when that process changes the fd. */

/* Map "fds_high": (tgid, fd >= SL_FD_SLOTS) -> entry, valid while inc is the table's. */
struct sl_fd_high {
    struct sl_fd_val v;
    __u32 inc;
    __u32 pad;
};

/* Ring buffer events. */
enum sl_event_kind {
    SL_EV_FD_SEEN = 1, /* an fd not seen created is in use: resolve id via /proc now */
    SL_EV_PROC_NEW = 2,
    SL_EV_PROC_EXIT = 3,
    SL_EV_FD_OPEN = 4, /* struct sl_open_event: open() returned fd; resolve id by its path */
    SL_EV_CHDIR = 5,   /* struct sl_open_event: chdir(path), or fchdir(fd) with fd's id */
};

struct sl_event {
    __u32 kind;
    __u32 tgid;
    __u32 tid;
    __s32 fd;
    __u32 id;
    __u32 flags;  /* SL_EV_FD_OPEN: SL_FLAG_FD_* from the open flags */
    __u32 parent; /* SL_EV_PROC_NEW: the process that started it */
    __u32 pad;
    char comm[16];
};

#define SL_PATH_MAX 256

struct sl_open_event {
    struct sl_event ev;
    __s32 dirfd;    /* AT_FDCWD (-100) or the fd a relative path starts from */
    __u32 dir_id;   /* that fd's id, when it was opened by path (user space has its path) */
    __s32 path_len; /* bytes in path with the NUL; SL_PATH_MAX may mean truncated; 0: none */
    __u32 pad;
    char path[SL_PATH_MAX];
};

#endif
