/* Types shared by bpf/trace.bpf.c and the user-space loader (the C++ in this directory).
 * Plain C with __u32-style types: vmlinux.h provides them in BPF, <linux/types.h> in user space.
 * Every name is prefixed sl_/SL_ because 6.18's vmlinux.h already defines many short names. */
#ifndef SLUICE_EBPF_TRACE_H
#define SLUICE_EBPF_TRACE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* What an fd is. The probe fills this in when it may read kernel memory; otherwise it stays
 * SL_CLS_UNKNOWN and user space resolves the (tgid, fd, generation) it reports via /proc. */
enum sl_fd_class {
	SL_CLS_UNKNOWN = 0,
	SL_CLS_FILE = 1,     /* regular file or block device: the page cache */
	SL_CLS_PIPE = 2,
	SL_CLS_SOCKET = 3,
	SL_CLS_DEVNULL = 4,  /* char 1:3 — writes are discarded, no data moves */
	SL_CLS_DEVZERO = 5,  /* char 1:5 — reads are zero fill, no data moves */
	SL_CLS_OTHER = 6,    /* tty, eventfd, other char devices, anon inodes */
	SL_CLS_NONE = 7,     /* the operation has no second fd (the other side is user memory) */
	SL_CLS_UNRESOLVED = 8, /* user space could not resolve it (fd closed or process gone) */
	SL_CLS_FIXED = 9,    /* io_uring registered (fixed) file, not resolvable without kernel reads */
	SL_CLS_COUNT = 10,
};

/* vmsplice direction travels in the flags byte: it decides copy vs. page pinning. */
#define SL_FLAG_FD_WRITABLE 0x1
/* The first fd was opened with O_DIRECT: its file reads and writes are the device's DMA, not
 * CPU copies between user and kernel memory. */
#define SL_FLAG_FD_DIRECT 0x2

/* op: a syscall number (x86_64), or SL_OP_URING | IORING_OP_* for io_uring requests. */
#define SL_OP_URING 0x8000

/* One counter per (process, operation, classes of the two fds). With kernel reads the fds
 * are folded away (fd = -1); without them each distinct fd incarnation gets its own key so
 * user space can resolve its class. gen changes whenever the fd number is closed or dup'ed
 * over; epoch changes at every exec of the process. */
struct sl_flow_key {
	__u32 tgid;
	__u16 op;
	__u8 cls_a;   /* the fd the syscall names first (source for read/splice/sendfile) */
	__u8 cls_b;   /* the second fd (splice/sendfile/copy_file_range/tee destination) */
	__s32 fd_a;
	__s32 fd_b;
	__u32 gen_a;
	__u32 gen_b;
	__u16 epoch;
	__u8 flags;
	__u8 pad;
};

struct sl_flow_val {
	__u64 bytes;
	__u64 calls;
	__u64 errors;
};

/* Per process (thread group). */
struct sl_proc_val {
	__u64 syscalls;
	__u64 cpu_ns;        /* on-CPU time from sched_switch, all threads */
	__u64 nvcsw;         /* voluntary context switches (blocked) */
	__u64 nivcsw;        /* involuntary (preempted while runnable) */
	__u64 utime_ns;      /* task_struct utime/stime summed at thread exit (kernel reads only) */
	__u64 stime_ns;
	__u64 sum_exec_ns;   /* task_struct se.sum_exec_runtime at thread exit (kernel reads only) */
	__u64 zc_notif;      /* io_uring SEND_ZC notifications */
	__u64 zc_notif_copied; /* ... that said the kernel copied the data anyway */
	__u32 ppid;
	__u16 epoch;
	__u8 exited;
	__u8 wait_exec;      /* set by user space for a command it forked: count nothing before exec */
	char comm[16];
};

/* Per thread, so io_uring workers (iou-wrk-*, iou-sqp-*) show up next to the process they serve. */
struct sl_thread_val {
	__u32 tgid;
	__u32 pad;
	__u64 cpu_ns;
	__u64 last_in_ns;    /* when it was last switched in; 0 when off CPU */
	char comm[16];
};

/* Ring buffer events. */
enum sl_event_kind {
	SL_EV_FD_SEEN = 1,   /* first use of (tgid, fd, gen, epoch): resolve it now, while it is open */
	SL_EV_PROC_NEW = 2,
	SL_EV_PROC_EXIT = 3,
};

struct sl_event {
	__u32 kind;
	__u32 tgid;
	__u32 tid;
	__s32 fd;
	__u32 gen;
	__u16 epoch;
	__u16 pad;
	char comm[16];
};

struct sl_fd_gen_key {
	__u32 tgid;
	__s32 fd;
};

struct sl_fd_seen_key {
	__u32 tgid;
	__s32 fd;
	__u32 gen;
	__u32 epoch;
};

#endif
