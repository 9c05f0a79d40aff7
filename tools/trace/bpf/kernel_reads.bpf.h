/* Everything the kernel-reads variant (trace.bpf.o) reads from kernel memory, in one place:
 * what an fd is (task->files->fdt->fd[fd]->f_inode), what a registered io_uring file is
 * (req->file), and a dying thread's utime/stime/sum_exec_runtime. All through BPF_CORE_READ,
 * so field offsets come from the running kernel's BTF at load time.
 * Under lockdown=confidentiality these reads are refused; fd_table.bpf.h is the other variant's
 * answer to the same four hooks: sl_side, sl_fixed_side, sl_exit_times, sl_uring_fd_result. */
#ifndef SLUICE_TRACE_KERNEL_READS_BPF_H
#define SLUICE_TRACE_KERNEL_READS_BPF_H

/* fd -> struct file * of the current task: task->files->fdt->fd[fd]. io-wq workers share the
 * submitter's files table, so this also holds on an iou-wrk thread. */
static __always_inline struct file* sl_fd_file(__s32 fd) {
    struct task_struct* t = (struct task_struct*)bpf_get_current_task();
    struct fdtable* fdt = BPF_CORE_READ(t, files, fdt);
    struct file** arr;
    struct file* f = NULL;

    if (!fdt || fd < 0 || (__u32)fd >= BPF_CORE_READ(fdt, max_fds)) return NULL;
    arr = BPF_CORE_READ(fdt, fd);
    bpf_core_read(&f, sizeof(f), &arr[fd]);
    return f;
}

static __always_inline __u8 sl_classify_file(struct file* f, __u8* flags) {
    struct inode* ino;
    __u32 mode, rdev;

    if (!f) return SL_CLS_UNKNOWN;
    if (BPF_CORE_READ(f, f_mode) & 0x2 /* FMODE_WRITE */) *flags |= SL_FLAG_FD_WRITABLE;
    if (BPF_CORE_READ(f, f_flags) & SL_O_DIRECT) *flags |= SL_FLAG_FD_DIRECT;
    ino = BPF_CORE_READ(f, f_inode);
    mode = BPF_CORE_READ(ino, i_mode) & 0170000;
    switch (mode) {
    case 0100000: /* S_IFREG */
    case 0060000: /* S_IFBLK */ return SL_CLS_FILE;
    case 0010000: /* S_IFIFO */ return SL_CLS_PIPE;
    case 0140000: /* S_IFSOCK */ return SL_CLS_SOCKET;
    case 0020000: /* S_IFCHR: kernel dev_t is major << 20 | minor */
        rdev = BPF_CORE_READ(ino, i_rdev);
        if (rdev == ((1U << 20) | 3)) return SL_CLS_DEVNULL;
        if (rdev == ((1U << 20) | 5)) return SL_CLS_DEVZERO;
        return SL_CLS_OTHER;
    default: return SL_CLS_OTHER;
    }
}

/* One side of a flow key for fd in the current task. The class is known here, so the fd is
 * folded away (id 0): all fds of a class share one counter. */
static __always_inline void sl_side(__u32 tgid, __s32 fd, __u8* cls, __u32* id, __u8* flags) {
    *cls = sl_classify_file(sl_fd_file(fd), flags);
    *id = 0;
}

/* A request whose first file is still unknown at completion, which is what a registered
 * (fixed) file looks like: those never pass io_uring_file_get. */
static __always_inline void sl_fixed_side(void* req, __u32 nfiles, __u8* cls, __u8* flags) {
    struct io_kiocb* k = req;

    *cls = sl_classify_file(BPF_CORE_READ(k, file), flags);
}

/* At thread exit: the tick-sampled utime/stime (for the user:system split) and the exact
 * sum_exec_runtime. */
static __always_inline void sl_exit_times(struct sl_proc_val* p) {
    struct task_struct* t = (struct task_struct*)bpf_get_current_task();

    __sync_fetch_and_add(&p->utime_ns, BPF_CORE_READ(t, utime));
    __sync_fetch_and_add(&p->stime_ns, BPF_CORE_READ(t, stime));
    __sync_fetch_and_add(&p->sum_exec_ns, BPF_CORE_READ(t, se.sum_exec_runtime));
}

/* An io_uring request that made an fd: nothing to remember, the inode says what it is. */
static __always_inline void sl_uring_fd_result(__u32 tgid, __u8 opcode, long res) {}

#endif
