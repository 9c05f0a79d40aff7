/* The no-kernel-reads variant's answer to "what is this fd?" (trace_nokr.bpf.o): a table of
 * the fds of every traced process, filled from the syscall that created each fd
 * (fd_create.bpf.h) and carried across fork, exec and exit here. It reads only tracepoint
 * arguments and the traced process's own memory, so it loads under lockdown=confidentiality.
 * An fd the probe never saw created (inherited before tracing started, or made by a syscall it
 * does not follow) gets an id on first use, and user space resolves it from /proc
 * (SL_EV_FD_SEEN): the last resort, which a process that exits first escapes.
 * Implements the hooks kernel_reads.bpf.h implements for the other variant. */
#ifndef SLUICE_TRACE_FD_TABLE_BPF_H
#define SLUICE_TRACE_FD_TABLE_BPF_H

/* (tgid, fd) -> what the fd is. User space seeds it at attach and reads it to check ids. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sl_fd_key);
	__type(value, struct sl_fd_val);
} fds SEC(".maps");

/* Traced, including a command the tracer forked that has not exec'd yet: its fd table is
 * what the command starts with. */
static __always_inline bool sl_fd_traced(__u32 tgid)
{
	return bpf_map_lookup_elem(&procs, &tgid) != NULL;
}

static __always_inline void sl_fd_put(__u32 tgid, __s32 fd, __u8 cls, __u8 flags, __u32 id)
{
	struct sl_fd_key k = { .tgid = tgid, .fd = fd };
	struct sl_fd_val v = { .id = id, .cls = cls, .flags = flags };

	bpf_map_update_elem(&fds, &k, &v, BPF_ANY);
}

static __always_inline void sl_fd_drop(__u32 tgid, __s32 fd)
{
	struct sl_fd_key k = { .tgid = tgid, .fd = fd };

	bpf_map_delete_elem(&fds, &k);
}

/* One side of a flow key for fd. A known class folds the fd away (id 0); an unknown one
 * carries the incarnation's id for user space to resolve. */
static __always_inline void sl_side(__u32 tgid, __s32 fd, __u8 *cls, __u32 *id, __u8 *flags)
{
	struct sl_fd_key k = { .tgid = tgid, .fd = fd };
	struct sl_fd_val fresh = { .cls = SL_CLS_UNKNOWN, .flags = SL_FDF_UNTRACKED }, *v;

	*cls = SL_CLS_UNKNOWN;
	*id = 0;
	if (fd < 0)
		return;
	v = bpf_map_lookup_elem(&fds, &k);
	if (!v) {
		/* Never seen created: ask user space to look at /proc while the fd is open. */
		fresh.id = sl_new_id();
		if (bpf_map_update_elem(&fds, &k, &fresh, BPF_NOEXIST) == 0) {
			sl_emit(SL_EV_FD_SEEN, tgid, (__u32)bpf_get_current_pid_tgid(), fd, fresh.id);
			*id = fresh.id;
			return;
		}
		v = bpf_map_lookup_elem(&fds, &k); /* another thread got there first */
		if (!v)
			return;
	}
	*cls = v->cls;
	*id = v->id;
	*flags |= v->flags & (SL_FLAG_FD_WRITABLE | SL_FLAG_FD_DIRECT);
}

/* A request whose first file is still unknown at completion and that took no file through
 * io_uring_file_get: a registered (fixed) file, which only a kernel read could name. */
static __always_inline void sl_fixed_side(void *req, __u32 nfiles, __u8 *cls, __u8 *flags)
{
	if (nfiles == 0)
		*cls = SL_CLS_FIXED;
}

static __always_inline void sl_exit_times(struct sl_proc_val *p)
{
	/* utime/stime live in task_struct: user space samples /proc/PID/stat instead. */
}

#define SL_IORING_OP_ACCEPT 13
#define SL_IORING_OP_OPENAT 18
#define SL_IORING_OP_OPENAT2 28
#define SL_IORING_OP_SOCKET 45
#define SL_IORING_OP_FIXED_FD_INSTALL 54

/* io_uring ops that make fds. Their result may also be a registered-file index (the
 * tracepoints do not say which), so nothing is recorded: an entry that number had is dropped
 * and the fd, if it is one, is resolved from /proc on first use. */
static __always_inline void sl_uring_fd_result(__u32 tgid, __u8 opcode, long res)
{
	if (res < 0)
		return;
	switch (opcode) {
	case SL_IORING_OP_ACCEPT:
	case SL_IORING_OP_OPENAT:
	case SL_IORING_OP_OPENAT2:
	case SL_IORING_OP_SOCKET:
	case SL_IORING_OP_FIXED_FD_INSTALL:
		sl_fd_drop(tgid, (__s32)res);
		break;
	}
}

/* Walks over the whole table, for what changes many fds at once. */
enum sl_walk_mode {
	SL_WALK_FORK = 1,     /* copy tgid's entries to child */
	SL_WALK_EXEC,         /* drop tgid's close-on-exec and untracked entries */
	SL_WALK_EXIT,         /* drop all of tgid's entries */
	SL_WALK_CLOSE,        /* close_range: drop tgid's entries in [lo, hi] */
	SL_WALK_SET_CLOEXEC,  /* close_range(CLOSE_RANGE_CLOEXEC): mark them instead */
};

struct sl_walk {
	__u32 mode;
	__u32 tgid;
	__u32 child;
	__u32 lo, hi;
};

/* Deleting the element being visited is safe (the hash map keeps its next pointer); the fork
 * walk only inserts, and never deletes, so no element is freed and reused under the walk. */
static long sl_walk_one(struct bpf_map *map, struct sl_fd_key *key, struct sl_fd_val *val, struct sl_walk *w)
{
	struct sl_fd_key ck;
	bool in_range;

	if (key->tgid != w->tgid)
		return 0;
	in_range = (__u32)key->fd >= w->lo && (__u32)key->fd <= w->hi;
	switch (w->mode) {
	case SL_WALK_FORK:
		ck.tgid = w->child;
		ck.fd = key->fd;
		bpf_map_update_elem(&fds, &ck, val, BPF_ANY);
		break;
	case SL_WALK_EXEC:
		if (val->flags & (SL_FDF_CLOEXEC | SL_FDF_UNTRACKED))
			bpf_map_delete_elem(&fds, key);
		break;
	case SL_WALK_EXIT:
		bpf_map_delete_elem(&fds, key);
		break;
	case SL_WALK_CLOSE:
		if (in_range)
			bpf_map_delete_elem(&fds, key);
		break;
	case SL_WALK_SET_CLOEXEC:
		if (in_range)
			val->flags |= SL_FDF_CLOEXEC;
		break;
	}
	return 0;
}

static __always_inline void sl_walk(__u32 mode, __u32 tgid, __u32 child, __u32 lo, __u32 hi)
{
	struct sl_walk w = { .mode = mode, .tgid = tgid, .child = child, .lo = lo, .hi = hi };

	bpf_for_each_map_elem(&fds, sl_walk_one, &w, 0);
}

/* A child process starts with a copy of its parent's table (fork, vfork, posix_spawn). A
 * child sharing it (CLONE_FILES without CLONE_THREAD, rare) gets a copy too, which then
 * misses what the other does. Threads share the tgid's entries. */
SEC("tracepoint/task/task_newtask")
int sl_fd_fork(struct trace_event_raw_task_newtask *ctx)
{
	__u32 parent = bpf_get_current_pid_tgid() >> 32;

	if ((ctx->clone_flags & 0x00010000ULL /* CLONE_THREAD */) || !sl_fd_traced(parent))
		return 0;
	sl_walk(SL_WALK_FORK, parent, (__u32)ctx->pid, 0, 0);
	return 0;
}

/* After exec has closed the close-on-exec fds. An untracked fd may have been one of them. */
SEC("tracepoint/sched/sched_process_exec")
int sl_fd_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (sl_fd_traced(tgid))
		sl_walk(SL_WALK_EXEC, tgid, 0, 0, 0);
	return 0;
}

/* group_dead arrived in sched_process_exit in 6.16; before it, the leader's exit stands in. */
struct trace_event_raw_sched_process_exit___sl {
	bool group_dead;
} __attribute__((preserve_access_index));

SEC("tracepoint/sched/sched_process_exit")
int sl_fd_exit(void *ctx)
{
	struct trace_event_raw_sched_process_exit___sl *e = ctx;
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tgid = pt >> 32;
	bool last;

	if (!sl_fd_traced(tgid))
		return 0;
	/* A direct (CO-RE relocated) load from the tracepoint record, not a kernel read. */
	if (bpf_core_field_exists(e->group_dead))
		last = e->group_dead;
	else
		last = (__u32)pt == tgid;
	if (last)
		sl_walk(SL_WALK_EXIT, tgid, 0, 0, 0);
	return 0;
}

#endif
