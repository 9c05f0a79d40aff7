/* Syscall accounting: every syscall of a traced process is counted; the ones that move bytes
 * (enum sl_op) add their return value to the flow of (op, class of each fd). The fds' classes
 * are taken at entry, while the fds are certainly open; the bytes at exit. */
#ifndef SLUICE_TRACE_SYSCALLS_BPF_H
#define SLUICE_TRACE_SYSCALLS_BPF_H

/* A byte-moving syscall between enter and exit, per thread. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16384);
    __type(key, __u32);
    __type(value, struct sl_flow_key);
} pending SEC(".maps");

/* This architecture's syscall number -> enum sl_op, or 0 for a syscall that moves no bytes. */
static __always_inline __u16 sl_op_of(long nr) {
    switch (nr) {
    case SL_NR_read: return SL_OP_READ;
    case SL_NR_write: return SL_OP_WRITE;
    case SL_NR_pread64: return SL_OP_PREAD64;
    case SL_NR_pwrite64: return SL_OP_PWRITE64;
    case SL_NR_readv: return SL_OP_READV;
    case SL_NR_writev: return SL_OP_WRITEV;
    case SL_NR_preadv: return SL_OP_PREADV;
    case SL_NR_pwritev: return SL_OP_PWRITEV;
    case SL_NR_preadv2: return SL_OP_PREADV2;
    case SL_NR_pwritev2: return SL_OP_PWRITEV2;
    case SL_NR_sendto: return SL_OP_SENDTO;
    case SL_NR_recvfrom: return SL_OP_RECVFROM;
    case SL_NR_sendmsg: return SL_OP_SENDMSG;
    case SL_NR_recvmsg: return SL_OP_RECVMSG;
    case SL_NR_sendmmsg: return SL_OP_SENDMMSG;
    case SL_NR_recvmmsg: return SL_OP_RECVMMSG;
    case SL_NR_sendfile: return SL_OP_SENDFILE;
    case SL_NR_splice: return SL_OP_SPLICE;
    case SL_NR_tee: return SL_OP_TEE;
    case SL_NR_vmsplice: return SL_OP_VMSPLICE;
    case SL_NR_copy_file_range: return SL_OP_COPY_FILE_RANGE;
    default: return 0;
    }
}

SEC("tracepoint/raw_syscalls/sys_enter")
int sl_sys_enter(struct trace_event_raw_sys_enter* ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    __u32 tgid = pt >> 32, tid = (__u32)pt;
    struct sl_proc_val* p = sl_proc(tgid);
    struct sl_flow_key k = {};
    /* Read the arguments up front: the verifier refuses a ctx pointer the compiler has offset,
	 * which is what per-case loads from ctx->args[i] turn into. */
    __s32 a0 = (__s32)ctx->args[0], a1 = (__s32)ctx->args[1], a2 = (__s32)ctx->args[2];
    __s32 fa = a0, fb = -1;
    __u16 op;

    if (!p) return 0;
    __sync_fetch_and_add(&p->syscalls, 1);
    sl_thread_seen(tid, tgid);

    op = sl_op_of(ctx->id);
    switch (op) {
    case 0: return 0;
    case SL_OP_SENDFILE: /* sendfile(out, in, ...): a is the source */
        fa = a1;
        fb = a0;
        break;
    case SL_OP_SPLICE: /* splice(in, off_in, out, off_out, ...) */
    case SL_OP_COPY_FILE_RANGE: fb = a2; break;
    case SL_OP_TEE: fb = a1; break;
    default: /* one fd, the first argument */ break;
    }
    k.tgid = tgid;
    k.op = op;
    sl_side(tgid, fa, &k.cls_a, &k.id_a, &k.flags);
    if (fb >= 0) {
        __u8 ignored = 0;

        sl_side(tgid, fb, &k.cls_b, &k.id_b, &ignored);
    } else {
        k.cls_b = SL_CLS_NONE;
    }
    bpf_map_update_elem(&pending, &tid, &k, BPF_ANY);
    return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int sl_sys_exit(struct trace_event_raw_sys_exit* ctx) {
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct sl_flow_key* k = bpf_map_lookup_elem(&pending, &tid);
    long ret = ctx->ret;

    if (!k) return 0;
    if (k->op == SL_OP_RECVMMSG || k->op == SL_OP_SENDMMSG)
        /* ret counts messages, not bytes: count the call only (documented limitation). */
        sl_flow_add(k, ret > 0 ? 0 : ret);
    else
        sl_flow_add(k, ret);
    bpf_map_delete_elem(&pending, &tid);
    return 0;
}

#endif
