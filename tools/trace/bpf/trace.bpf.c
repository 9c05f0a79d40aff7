// SPDX-License-Identifier: GPL-2.0
/* sluice trace: count the bytes a process tree moves, by syscall and io_uring opcode and by
 * what the fd is, plus syscalls, context switches and on-CPU time.
 *
 * Built twice (meson.build here):
 *   trace.bpf.o       classifies fds in the probe by walking task->files (BPF_CORE_READ);
 *   trace_nokr.bpf.o  with -DSL_NO_KERNEL_READS: reads only tracepoint arguments, so it loads
 *                     under lockdown=confidentiality; it reports (tgid, fd, generation) and user
 *                     space resolves the class through /proc/PID/fd.
 * Only tracepoints: fentry/fexit are refused on the target machine and kprobes are not built. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "trace.h"

char LICENSE[] SEC("license") = "GPL";

/* x86_64 syscall numbers (this tool is built with -D__TARGET_ARCH_x86 only). */
#define SL_NR_read 0
#define SL_NR_write 1
#define SL_NR_close 3
#define SL_NR_pread64 17
#define SL_NR_pwrite64 18
#define SL_NR_readv 19
#define SL_NR_writev 20
#define SL_NR_dup2 33
#define SL_NR_sendfile 40
#define SL_NR_sendto 44
#define SL_NR_recvfrom 45
#define SL_NR_sendmsg 46
#define SL_NR_recvmsg 47
#define SL_NR_splice 275
#define SL_NR_tee 276
#define SL_NR_vmsplice 278
#define SL_NR_dup3 292
#define SL_NR_preadv 295
#define SL_NR_pwritev 296
#define SL_NR_recvmmsg 299
#define SL_NR_sendmmsg 307
#define SL_NR_copy_file_range 326
#define SL_NR_preadv2 327
#define SL_NR_pwritev2 328

#define SL_CLONE_THREAD 0x00010000ULL
#define SL_CQE_F_MORE (1U << 1)
#define SL_CQE_F_NOTIF (1U << 3)
#define SL_NOTIF_USAGE_ZC_COPIED (1U << 31)

/* A syscall between enter and exit, per thread. */
struct sl_pending {
	struct sl_flow_key key;
	__u32 id;
	__s32 gen_fd;   /* close/dup2/dup3: the fd number whose generation changes on success */
};

/* An io_uring request between submission and completion. */
struct sl_req {
	struct sl_flow_key key;
	__u32 nfiles;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct sl_proc_val);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct sl_thread_val);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sl_flow_key);
	__type(value, struct sl_flow_val);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct sl_pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct sl_req);
} reqs SEC(".maps");

/* io_uring ring -> process, for notification CQEs that have no submission of their own. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sl_fd_gen_key);
	__type(value, __u32);
} fd_gens SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sl_fd_seen_key);
	__type(value, __u8);
} fd_seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* The traced process, or NULL: not traced, or forked by the tracer and not yet exec'd (its
 * wait on the tracer's start gate is not part of the command). */
static __always_inline struct sl_proc_val *sl_proc(__u32 tgid)
{
	struct sl_proc_val *p = bpf_map_lookup_elem(&procs, &tgid);

	return p && !p->wait_exec ? p : NULL;
}

static __always_inline void sl_emit(__u32 kind, __u32 tgid, __u32 tid, __s32 fd, __u32 gen, __u16 epoch)
{
	struct sl_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return;
	e->kind = kind;
	e->tgid = tgid;
	e->tid = tid;
	e->fd = fd;
	e->gen = gen;
	e->epoch = epoch;
	e->pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

#ifndef SL_NO_KERNEL_READS
/* fd -> struct file * of the current task: task->files->fdt->fd[fd]. io-wq workers share the
 * submitter's files table, so this also holds on an iou-wrk thread. */
static __always_inline struct file *sl_fd_file(__s32 fd)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct file **arr;
	struct file *f = NULL;

	if (!fdt || fd < 0 || (__u32)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	arr = BPF_CORE_READ(fdt, fd);
	bpf_core_read(&f, sizeof(f), &arr[fd]);
	return f;
}

static __always_inline __u8 sl_classify_file(struct file *f, __u8 *flags)
{
	struct inode *ino;
	__u32 mode, rdev;

	if (!f)
		return SL_CLS_UNKNOWN;
	if (BPF_CORE_READ(f, f_mode) & 0x2 /* FMODE_WRITE */)
		*flags |= SL_FLAG_FD_WRITABLE;
	if (BPF_CORE_READ(f, f_flags) & 040000 /* O_DIRECT */)
		*flags |= SL_FLAG_FD_DIRECT;
	ino = BPF_CORE_READ(f, f_inode);
	mode = BPF_CORE_READ(ino, i_mode) & 0170000;
	switch (mode) {
	case 0100000: /* S_IFREG */
	case 0060000: /* S_IFBLK */
		return SL_CLS_FILE;
	case 0010000: /* S_IFIFO */
		return SL_CLS_PIPE;
	case 0140000: /* S_IFSOCK */
		return SL_CLS_SOCKET;
	case 0020000: /* S_IFCHR: kernel dev_t is major << 20 | minor */
		rdev = BPF_CORE_READ(ino, i_rdev);
		if (rdev == ((1U << 20) | 3))
			return SL_CLS_DEVNULL;
		if (rdev == ((1U << 20) | 5))
			return SL_CLS_DEVZERO;
		return SL_CLS_OTHER;
	default:
		return SL_CLS_OTHER;
	}
}
#endif

/* Fill one side of a flow key for fd (in the current task's fd table). */
static __always_inline void sl_side(__u32 tgid, __u16 epoch, __s32 fd, __u8 *cls, __s32 *kfd, __u32 *kgen,
				    __u8 *flags)
{
#ifndef SL_NO_KERNEL_READS
	/* The class is known here: fold the fd away so all fds of a class share one counter. */
	*cls = sl_classify_file(sl_fd_file(fd), flags);
	*kfd = -1;
	*kgen = 0;
#else
	struct sl_fd_gen_key gk = { .tgid = tgid, .fd = fd };
	struct sl_fd_seen_key sk = {};
	__u32 *g = bpf_map_lookup_elem(&fd_gens, &gk);
	__u8 one = 1;

	*cls = SL_CLS_UNKNOWN;
	*kfd = fd;
	*kgen = g ? *g : 0;
	sk.tgid = tgid;
	sk.fd = fd;
	sk.gen = *kgen;
	sk.epoch = epoch;
	/* First use of this fd incarnation: ask user space to resolve it while it is still open. */
	if (fd >= 0 && bpf_map_update_elem(&fd_seen, &sk, &one, BPF_NOEXIST) == 0)
		sl_emit(SL_EV_FD_SEEN, tgid, (__u32)bpf_get_current_pid_tgid(), fd, *kgen, epoch);
#endif
}

static __always_inline void sl_flow_add(struct sl_flow_key *k, long ret)
{
	struct sl_flow_val zero = {}, *v;

	v = bpf_map_lookup_elem(&flows, k);
	if (!v) {
		bpf_map_update_elem(&flows, k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&flows, k);
		if (!v)
			return;
	}
	__sync_fetch_and_add(&v->calls, 1);
	if (ret > 0)
		__sync_fetch_and_add(&v->bytes, ret);
	else if (ret < 0)
		__sync_fetch_and_add(&v->errors, 1);
}

static __always_inline void sl_thread_seen(__u32 tid, __u32 tgid)
{
	struct sl_thread_val t = {};

	if (bpf_map_lookup_elem(&threads, &tid))
		return;
	t.tgid = tgid;
	t.last_in_ns = bpf_ktime_get_ns(); /* it is on CPU right now */
	bpf_get_current_comm(t.comm, sizeof(t.comm));
	bpf_map_update_elem(&threads, &tid, &t, BPF_NOEXIST);
}

SEC("tracepoint/raw_syscalls/sys_enter")
int sl_sys_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tgid = pt >> 32, tid = (__u32)pt;
	struct sl_proc_val *p = sl_proc(tgid);
	struct sl_pending pd = {};
	long id = ctx->id;
	/* Read the arguments up front: the verifier refuses a ctx pointer the compiler has offset,
	 * which is what per-case loads from ctx->args[i] turn into. */
	__s32 a0 = (__s32)ctx->args[0], a1 = (__s32)ctx->args[1], a2 = (__s32)ctx->args[2];
	__s32 fa = -1, fb = -1;

	if (!p)
		return 0;
	__sync_fetch_and_add(&p->syscalls, 1);
	sl_thread_seen(tid, tgid);

	switch (id) {
	case SL_NR_read: case SL_NR_write: case SL_NR_pread64: case SL_NR_pwrite64:
	case SL_NR_readv: case SL_NR_writev: case SL_NR_preadv: case SL_NR_pwritev:
	case SL_NR_preadv2: case SL_NR_pwritev2: case SL_NR_recvfrom: case SL_NR_recvmsg:
	case SL_NR_recvmmsg: case SL_NR_sendto: case SL_NR_sendmsg: case SL_NR_sendmmsg:
	case SL_NR_vmsplice:
		fa = a0;
		break;
	case SL_NR_sendfile: /* sendfile(out, in, ...): a is the source */
		fa = a1;
		fb = a0;
		break;
	case SL_NR_splice: /* splice(in, off_in, out, off_out, ...) */
	case SL_NR_copy_file_range:
		fa = a0;
		fb = a2;
		break;
	case SL_NR_tee:
		fa = a0;
		fb = a1;
		break;
	case SL_NR_close:
		pd.gen_fd = a0;
		goto save;
	case SL_NR_dup2: case SL_NR_dup3:
		pd.gen_fd = a1;
		goto save;
	default:
		return 0;
	}
	pd.key.tgid = tgid;
	pd.key.op = (__u16)id;
	pd.key.epoch = p->epoch;
	sl_side(tgid, p->epoch, fa, &pd.key.cls_a, &pd.key.fd_a, &pd.key.gen_a, &pd.key.flags);
	if (fb >= 0) {
		__u8 ignored = 0;
		sl_side(tgid, p->epoch, fb, &pd.key.cls_b, &pd.key.fd_b, &pd.key.gen_b, &ignored);
	} else {
		pd.key.cls_b = SL_CLS_NONE;
		pd.key.fd_b = -1;
	}
	pd.gen_fd = -1;
save:
	pd.id = (__u32)id;
	bpf_map_update_elem(&pending, &tid, &pd, BPF_ANY);
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int sl_sys_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pt;
	struct sl_pending *pd = bpf_map_lookup_elem(&pending, &tid);
	long ret = ctx->ret;

	if (!pd)
		return 0;
	if (pd->id == SL_NR_close || pd->id == SL_NR_dup2 || pd->id == SL_NR_dup3) {
		/* The fd number now names a different open file (or none): new generation. */
		struct sl_fd_gen_key gk = { .tgid = pt >> 32, .fd = pd->gen_fd };
		__u32 one = 1, *g;

		if (ret >= 0) {
			g = bpf_map_lookup_elem(&fd_gens, &gk);
			if (g)
				__sync_fetch_and_add(g, 1);
			else
				bpf_map_update_elem(&fd_gens, &gk, &one, BPF_NOEXIST);
		}
	} else if (pd->id == SL_NR_recvmmsg || pd->id == SL_NR_sendmmsg) {
		/* ret counts messages, not bytes: count the call only (documented limitation). */
		sl_flow_add(&pd->key, ret > 0 ? 0 : ret);
	} else {
		sl_flow_add(&pd->key, ret);
	}
	bpf_map_delete_elem(&pending, &tid);
	return 0;
}

SEC("tracepoint/sched/sched_switch")
int sl_sched_switch(struct trace_event_raw_sched_switch *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 prev = ctx->prev_pid, next = ctx->next_pid;
	struct sl_thread_val *t;

	t = bpf_map_lookup_elem(&threads, &prev);
	if (t && prev) {
		struct sl_proc_val *p = sl_proc(t->tgid);

		if (t->last_in_ns) {
			__u64 d = now - t->last_in_ns;

			__sync_fetch_and_add(&t->cpu_ns, d);
			if (p)
				__sync_fetch_and_add(&p->cpu_ns, d);
		}
		t->last_in_ns = 0;
		bpf_get_current_comm(t->comm, sizeof(t->comm)); /* current is prev here */
		if (p) {
			/* prev_state 0 is TASK_RUNNING: it was preempted, not blocked. */
			if (ctx->prev_state == 0)
				__sync_fetch_and_add(&p->nivcsw, 1);
			else
				__sync_fetch_and_add(&p->nvcsw, 1);
		}
	}
	t = bpf_map_lookup_elem(&threads, &next);
	if (t && next)
		t->last_in_ns = now;
	return 0;
}

SEC("tracepoint/task/task_newtask")
int sl_task_newtask(struct trace_event_raw_task_newtask *ctx)
{
	__u32 parent = bpf_get_current_pid_tgid() >> 32;
	__u32 pid = ctx->pid;
	struct sl_proc_val *pp = sl_proc(parent);
	struct sl_thread_val t = {};

	if (!pp)
		return 0;
	t.tgid = parent;
	/* The child starts with the parent's name (the tracepoint's comm is the same); io-wq
	 * workers rename themselves once running, which sched_switch picks up. */
	bpf_get_current_comm(t.comm, sizeof(t.comm));
	if (!(ctx->clone_flags & SL_CLONE_THREAD)) {
		struct sl_proc_val p = {};

		/* A new process started by a traced one: trace it too. */
		p.ppid = parent;
		__builtin_memcpy(p.comm, t.comm, sizeof(p.comm));
		bpf_map_update_elem(&procs, &pid, &p, BPF_ANY);
		t.tgid = pid;
		sl_emit(SL_EV_PROC_NEW, pid, pid, -1, 0, 0);
	}
	/* Threads, io-wq workers (iou-wrk) and SQPOLL threads (iou-sqp) are created with
	 * CLONE_THREAD and no sched_process_fork: this is where they are charged to the process. */
	bpf_map_update_elem(&threads, &pid, &t, BPF_ANY);
	return 0;
}

SEC("tracepoint/sched/sched_process_exec")
int sl_process_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct sl_proc_val *p = bpf_map_lookup_elem(&procs, &tgid);

	if (!p)
		return 0;
	p->wait_exec = 0;
	/* exec closes O_CLOEXEC fds behind our back: a new epoch makes every fd a new incarnation. */
	p->epoch++;
	bpf_get_current_comm(p->comm, sizeof(p->comm));
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int sl_process_exit(struct trace_event_raw_sched_process_template *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tgid = pt >> 32, tid = (__u32)pt;
	struct sl_proc_val *p = sl_proc(tgid);

	if (!p)
		return 0;
	{
		/* Close the slice the thread is running now: user space reads the totals when the
		 * exit event arrives, before the dying task's last sched_switch, so a process that
		 * never got switched out would otherwise show no CPU time at all. */
		struct sl_thread_val *th = bpf_map_lookup_elem(&threads, &tid);

		if (th && th->last_in_ns) {
			__u64 d = bpf_ktime_get_ns() - th->last_in_ns;

			__sync_fetch_and_add(&th->cpu_ns, d);
			__sync_fetch_and_add(&p->cpu_ns, d);
			th->last_in_ns = 0;
		}
	}
#ifndef SL_NO_KERNEL_READS
	{
		struct task_struct *t = (struct task_struct *)bpf_get_current_task();

		__sync_fetch_and_add(&p->utime_ns, BPF_CORE_READ(t, utime));
		__sync_fetch_and_add(&p->stime_ns, BPF_CORE_READ(t, stime));
		__sync_fetch_and_add(&p->sum_exec_ns, BPF_CORE_READ(t, se.sum_exec_runtime));
	}
#endif
	if (tid == tgid) {
		bpf_get_current_comm(p->comm, sizeof(p->comm));
		p->exited = 1;
		sl_emit(SL_EV_PROC_EXIT, tgid, tid, -1, 0, 0);
	}
	return 0;
}

SEC("tracepoint/io_uring/io_uring_submit_req")
int sl_uring_submit(struct trace_event_raw_io_uring_submit_req *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct sl_proc_val *p = sl_proc(tgid);
	struct sl_req r = {};
	__u64 req = (__u64)ctx->req, ring = (__u64)ctx->ctx;

	if (!p)
		return 0;
	r.key.tgid = tgid;
	r.key.op = SL_OP_URING | ctx->opcode;
	r.key.epoch = p->epoch;
	r.key.fd_a = -1;
	r.key.fd_b = -1;
	r.key.cls_b = SL_CLS_NONE;
	bpf_map_update_elem(&reqs, &req, &r, BPF_ANY);
	bpf_map_update_elem(&rings, &ring, &tgid, BPF_ANY);
	return 0;
}

/* Fires for each non-fixed file a request takes: sqe->fd first, then (IORING_OP_SPLICE/TEE)
 * the splice_fd_in source. Runs in the submitter or its io-wq worker: same fd table. */
SEC("tracepoint/io_uring/io_uring_file_get")
int sl_uring_file_get(struct trace_event_raw_io_uring_file_get *ctx)
{
	__u64 req = (__u64)ctx->req;
	struct sl_req *r = bpf_map_lookup_elem(&reqs, &req);
	struct sl_proc_val *p;
	__u8 ignored = 0;

	if (!r)
		return 0;
	p = sl_proc(r->key.tgid);
	if (!p)
		return 0;
	if (r->nfiles == 0)
		sl_side(r->key.tgid, r->key.epoch, ctx->fd, &r->key.cls_a, &r->key.fd_a, &r->key.gen_a,
			&r->key.flags);
	else if (r->nfiles == 1)
		sl_side(r->key.tgid, r->key.epoch, ctx->fd, &r->key.cls_b, &r->key.fd_b, &r->key.gen_b,
			&ignored);
	r->nfiles++;
	return 0;
}

SEC("tracepoint/io_uring/io_uring_complete")
int sl_uring_complete(struct trace_event_raw_io_uring_complete *ctx)
{
	__u64 req = (__u64)ctx->req, ring = (__u64)ctx->ctx;
	struct sl_req *r = bpf_map_lookup_elem(&reqs, &req);
	unsigned int cflags = ctx->cflags;

	if (!r) {
		/* SEND_ZC notification: its own request never went through submit_req. */
		__u32 *tgid = bpf_map_lookup_elem(&rings, &ring);
		struct sl_proc_val *p;

		if (!tgid || !(cflags & SL_CQE_F_NOTIF))
			return 0;
		p = sl_proc(*tgid);
		if (!p)
			return 0;
		__sync_fetch_and_add(&p->zc_notif, 1);
		if ((__u32)ctx->res & SL_NOTIF_USAGE_ZC_COPIED)
			__sync_fetch_and_add(&p->zc_notif_copied, 1);
		return 0;
	}
#ifndef SL_NO_KERNEL_READS
	/* Registered (fixed) files never pass io_uring_file_get: read req->file instead. */
	if (r->key.cls_a == SL_CLS_UNKNOWN) {
		struct io_kiocb *k = (struct io_kiocb *)ctx->req;

		r->key.cls_a = sl_classify_file(BPF_CORE_READ(k, file), &r->key.flags);
	}
#else
	if (r->nfiles == 0)
		r->key.cls_a = SL_CLS_FIXED;
#endif
	sl_flow_add(&r->key, ctx->res);
	if (!(cflags & SL_CQE_F_MORE))
		bpf_map_delete_elem(&reqs, &req);
	return 0;
}
