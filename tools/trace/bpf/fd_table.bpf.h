/* The no-kernel-reads variant's answer to "what is this fd?" (trace_nokr.bpf.o): a table per
 * traced process, filled from the syscall that created each fd (fd_create.bpf.h) and kept the
 * way the kernel keeps its own: copied at fork, close-on-exec fds dropped at exec, freed at
 * exit. It reads only tracepoint arguments and the traced process's own memory, so it loads
 * under lockdown=confidentiality. Where it has no answer, user space does:
 *   - fds a process had when tracing started: the "seeds" map, from /proc at that moment;
 *   - fds it never saw created (io_uring, eventfd, SCM_RIGHTS...): an id on first use, which
 *     user space resolves from /proc (SL_EV_FD_SEEN): the last resort, which a process that
 *     exits first escapes.
 * Implements the hooks kernel_reads.bpf.h implements for the other variant.
 * Needs Linux 5.17 (bpf_loop; the ring buffer alone needed 5.8). */
#ifndef SLUICE_TRACE_FD_TABLE_BPF_H
#define SLUICE_TRACE_FD_TABLE_BPF_H

/* 8 KiB a process, allocated as processes appear (no preallocation of all 4096). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct sl_fd_table);
} fdtabs SEC(".maps");

/* fds >= SL_FD_SLOTS. LRU: entries of exited processes age out; inc tells stale ones. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 65536);
    __type(key, struct sl_fd_key);
    __type(value, struct sl_fd_high);
} fds_high SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 8192);
    __type(key, struct sl_fd_key);
    __type(value, struct sl_fd_val);
} seeds SEC(".maps");

/* A zeroed table to create new ones from: 8 KiB does not fit on the BPF stack. */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct sl_fd_table);
} fd_scratch SEC(".maps");

/* Traced, including a command the tracer forked that has not exec'd yet: its fd table is
 * what the command starts with. */
static __always_inline bool sl_fd_traced(__u32 tgid) { return bpf_map_lookup_elem(&procs, &tgid) != NULL; }

/* tgid's table. A traced process without one is one user space tracked (children get a copy
 * at fork), so it is its own root. */
static __always_inline struct sl_fd_table* sl_fd_tab(__u32 tgid) {
    struct sl_fd_table* t = bpf_map_lookup_elem(&fdtabs, &tgid);
    __u32 zero = 0;

    if (t) return t;
    t = bpf_map_lookup_elem(&fd_scratch, &zero);
    if (!t) return NULL;
    t->root = tgid;
    t->execs = 0;
    t->inc = sl_new_id();
    bpf_map_update_elem(&fdtabs, &tgid, t, BPF_NOEXIST);
    return bpf_map_lookup_elem(&fdtabs, &tgid);
}

static __always_inline bool sl_slot_live(struct sl_fd_val* s) { return s->flags & SL_FDF_LIVE; }

/* The slot of fd, or NULL (fd < 0, or no memory). A high fd's entry is made on demand. */
static __always_inline struct sl_fd_val* sl_fd_slot(struct sl_fd_table* t, __u32 tgid, __s32 fd) {
    struct sl_fd_key k = {.tgid = tgid, .fd = fd};
    struct sl_fd_high fresh = {}, *h;

    __u32 i = (__u32)fd;

    if (fd < 0) return NULL;
    if (i < SL_FD_SLOTS) {
        barrier_var(i); /* keep the mask: the verifier needs the bound on the register it uses */
        return &t->fd[i & (SL_FD_SLOTS - 1)];
    }
    h = bpf_map_lookup_elem(&fds_high, &k);
    if (h && h->inc == t->inc) return &h->v;
    fresh.inc = t->inc;
    bpf_map_update_elem(&fds_high, &k, &fresh, BPF_ANY);
    h = bpf_map_lookup_elem(&fds_high, &k);
    return h ? &h->v : NULL;
}

/* The slot, with the start-of-trace seed applied if the fd has not been seen since. */
static __always_inline struct sl_fd_val* sl_fd_known(struct sl_fd_table* t, __u32 tgid, __s32 fd) {
    struct sl_fd_val *s = sl_fd_slot(t, tgid, fd), *seed;
    struct sl_fd_key k = {.tgid = t->root, .fd = fd};

    if (!s || (s->flags & (SL_FDF_LIVE | SL_FDF_GONE))) return s;
    seed = bpf_map_lookup_elem(&seeds, &k);
    if (!seed || ((seed->flags & SL_FDF_CLOEXEC) && t->execs > 0)) return s;
    s->id = 0;
    s->cls = seed->cls;
    s->flags = seed->flags | (s->flags & SL_FDF_CLOEXEC) | SL_FDF_LIVE;
    return s;
}

/* fd now names something new (or nothing): its seed, if it had one, no longer applies. */
static __always_inline void sl_fd_unseed(__u32 tgid, __s32 fd) {
    struct sl_fd_key k = {.tgid = tgid, .fd = fd};

    bpf_map_delete_elem(&seeds, &k);
}

static __always_inline void sl_fd_put(__u32 tgid, __s32 fd, __u8 cls, __u8 flags, __u32 id) {
    struct sl_fd_table* t = sl_fd_tab(tgid);
    struct sl_fd_val* s = t ? sl_fd_slot(t, tgid, fd) : NULL;

    sl_fd_unseed(tgid, fd);
    if (!s) return;
    s->id = id;
    s->cls = cls;
    s->flags = flags | SL_FDF_LIVE;
}

static __always_inline void sl_fd_drop(__u32 tgid, __s32 fd) {
    struct sl_fd_table* t = sl_fd_tab(tgid);
    struct sl_fd_val* s = t ? sl_fd_slot(t, tgid, fd) : NULL;

    sl_fd_unseed(tgid, fd);
    if (!s) return;
    s->id = 0;
    s->cls = 0;
    s->flags = SL_FDF_GONE;
}

/* One side of a flow key for fd. A known class folds the fd away (id 0); an unknown one
 * carries the incarnation's id for user space to resolve. */
static __always_inline void sl_side(__u32 tgid, __s32 fd, __u8* cls, __u32* id, __u8* flags) {
    struct sl_fd_table* t = sl_fd_tab(tgid);
    struct sl_fd_val* s = t ? sl_fd_known(t, tgid, fd) : NULL;

    *cls = SL_CLS_UNKNOWN;
    *id = 0;
    if (!s) return;
    if (!sl_slot_live(s)) {
        /* Never seen created: ask user space to look at /proc while the fd is open. */
        s->id = sl_new_id();
        s->cls = SL_CLS_UNKNOWN;
        s->flags = SL_FDF_LIVE | SL_FDF_UNTRACKED;
        sl_emit(SL_EV_FD_SEEN, tgid, (__u32)bpf_get_current_pid_tgid(), fd, s->id, 0);
    }
    *cls = s->cls;
    *id = s->id;
    *flags |= s->flags & (SL_FLAG_FD_WRITABLE | SL_FLAG_FD_DIRECT);
}

/* A request whose first file is still unknown at completion and that took no file through
 * io_uring_file_get: a registered (fixed) file, which only a kernel read could name. */
static __always_inline void sl_fixed_side(void* req, __u32 nfiles, __u8* cls, __u8* flags) {
    if (nfiles == 0) *cls = SL_CLS_FIXED;
}

static __always_inline void sl_exit_times(struct sl_proc_val* p) {
    /* utime/stime live in task_struct: user space samples /proc/PID/stat instead. */
}

#define SL_IORING_OP_ACCEPT 13
#define SL_IORING_OP_OPENAT 18
#define SL_IORING_OP_OPENAT2 28
#define SL_IORING_OP_SOCKET 45
#define SL_IORING_OP_FIXED_FD_INSTALL 54

/* io_uring ops that make fds. Their result may also be a registered-file index (the
 * tracepoints do not say which), so nothing is recorded: the slot is marked closed, and the fd,
 * if it is one, is resolved from /proc on first use. */
static __always_inline void sl_uring_fd_result(__u32 tgid, __u8 opcode, long res) {
    if (res < 0) return;
    switch (opcode) {
    case SL_IORING_OP_ACCEPT:
    case SL_IORING_OP_OPENAT:
    case SL_IORING_OP_OPENAT2:
    case SL_IORING_OP_SOCKET:
    case SL_IORING_OP_FIXED_FD_INSTALL: sl_fd_drop(tgid, (__s32)res); break;
    }
}

/* A change to many slots at once (exec, close_range), one bpf_loop callback per slot. */
struct sl_sweep {
    struct sl_fd_table* t;
    __u32 tgid;
    __u32 lo;
    bool exec;    /* exec: drop close-on-exec and untracked fds */
    bool cloexec; /* close_range(CLOSE_RANGE_CLOEXEC): mark instead of closing */
};

static long sl_sweep_one(__u32 i, struct sl_sweep* w) {
    __u32 n = w->lo + i;
    struct sl_fd_val* s;

    barrier_var(n);
    s = &w->t->fd[n & (SL_FD_SLOTS - 1)];

    if (w->exec) {
        if (s->flags & (SL_FDF_CLOEXEC | SL_FDF_UNTRACKED)) s->flags = SL_FDF_GONE;
    } else if (w->cloexec) {
        s->flags |= SL_FDF_CLOEXEC;
    } else {
        sl_fd_unseed(w->tgid, (__s32)n);
        s->id = 0;
        s->cls = 0;
        s->flags = SL_FDF_GONE;
    }
    return 0;
}

/* close_range(lo, hi, flags) succeeded. High fds in the range: their entries are orphaned by
 * a new incarnation, so they are looked up again on first use. */
static __always_inline void sl_fd_close_range(__u32 tgid, __u32 lo, __u32 hi, bool cloexec) {
    struct sl_fd_table* t = sl_fd_tab(tgid);
    struct sl_sweep w = {.t = t, .tgid = tgid, .lo = lo, .cloexec = cloexec};

    if (!t) return;
    if (lo < SL_FD_SLOTS) bpf_loop((hi < SL_FD_SLOTS ? hi : SL_FD_SLOTS - 1) - lo + 1, sl_sweep_one, &w, 0);
    if (hi >= SL_FD_SLOTS) t->inc = sl_new_id();
}

/* A child process starts with a copy of its parent's table (fork, vfork, posix_spawn), and
 * its own incarnation of high fds (they are looked up again). A child sharing the table
 * (CLONE_FILES without CLONE_THREAD, rare) gets a copy too, which then misses what the other
 * does. Threads share the tgid's table. */
SEC("tracepoint/task/task_newtask")
int sl_fd_fork(struct trace_event_raw_task_newtask* ctx) {
    __u32 parent = bpf_get_current_pid_tgid() >> 32, child = ctx->pid;
    struct sl_fd_table* t;

    if ((ctx->clone_flags & 0x00010000ULL /* CLONE_THREAD */) || !sl_fd_traced(parent)) return 0;
    t = sl_fd_tab(parent);
    if (!t || bpf_map_update_elem(&fdtabs, &child, t, BPF_ANY)) return 0;
    t = bpf_map_lookup_elem(&fdtabs, &child);
    if (t) t->inc = sl_new_id();
    return 0;
}

/* After exec has closed the close-on-exec fds. An untracked fd may have been one of them. */
SEC("tracepoint/sched/sched_process_exec")
int sl_fd_exec(struct trace_event_raw_sched_process_exec* ctx) {
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct sl_fd_table* t;
    struct sl_sweep w = {.tgid = tgid, .exec = true};

    if (!sl_fd_traced(tgid) || !(t = sl_fd_tab(tgid))) return 0;
    w.t = t;
    bpf_loop(SL_FD_SLOTS, sl_sweep_one, &w, 0);
    t->execs++;
    t->inc = sl_new_id();
    return 0;
}

/* group_dead arrived in sched_process_exit in 6.16; before it, the leader's exit stands in. */
struct trace_event_raw_sched_process_exit___sl {
    bool group_dead;
} __attribute__((preserve_access_index));

SEC("tracepoint/sched/sched_process_exit")
int sl_fd_exit(void* ctx) {
    struct trace_event_raw_sched_process_exit___sl* e = ctx;
    __u64 pt = bpf_get_current_pid_tgid();
    __u32 tgid = pt >> 32;
    bool last;

    if (!sl_fd_traced(tgid)) return 0;
    /* A direct (CO-RE relocated) load from the tracepoint record, not a kernel read. */
    if (bpf_core_field_exists(e->group_dead))
        last = e->group_dead;
    else
        last = (__u32)pt == tgid;
    if (last) bpf_map_delete_elem(&fdtabs, &tgid);
    return 0;
}

#endif
