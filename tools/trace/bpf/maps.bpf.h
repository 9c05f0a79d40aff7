/* State every part of the probe shares: who is traced (procs, threads), what they moved
 * (flows) and the event ring to user space. Keys and values are the contract in trace.h. */
#ifndef SLUICE_TRACE_MAPS_BPF_H
#define SLUICE_TRACE_MAPS_BPF_H

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
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 1 << 20);
} events SEC(".maps");

/* Ids for fd incarnations user space has to resolve; 0 means "class known in the probe". */
__u32 sl_last_id = 0;

static __always_inline __u32 sl_new_id(void) { return __sync_fetch_and_add(&sl_last_id, 1) + 1; }

/* The traced process, or NULL: not traced, or forked by the tracer and not yet exec'd (its
 * wait on the tracer's start gate is not part of the command). */
static __always_inline struct sl_proc_val* sl_proc(__u32 tgid) {
    struct sl_proc_val* p = bpf_map_lookup_elem(&procs, &tgid);

    return p && !p->wait_exec ? p : NULL;
}

static __always_inline void sl_emit(__u32 kind, __u32 tgid, __u32 tid, __s32 fd, __u32 id, __u32 parent) {
    struct sl_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

    if (!e) return;
    e->kind = kind;
    e->tgid = tgid;
    e->tid = tid;
    e->fd = fd;
    e->id = id;
    e->flags = 0;
    e->parent = parent;
    e->pad = 0;
    bpf_get_current_comm(e->comm, sizeof(e->comm));
    bpf_ringbuf_submit(e, 0);
}

static __always_inline void sl_flow_add(struct sl_flow_key* k, long ret) {
    struct sl_flow_val zero = {}, *v;

    v = bpf_map_lookup_elem(&flows, k);
    if (!v) {
        bpf_map_update_elem(&flows, k, &zero, BPF_NOEXIST);
        v = bpf_map_lookup_elem(&flows, k);
        if (!v) return;
    }
    __sync_fetch_and_add(&v->calls, 1);
    if (ret > 0)
        __sync_fetch_and_add(&v->bytes, ret);
    else if (ret < 0)
        __sync_fetch_and_add(&v->errors, 1);
}

/* A thread of a traced process that tracing did not see start (it existed before the attach):
 * from now on sched_switch charges its CPU time. */
static __always_inline void sl_thread_seen(__u32 tid, __u32 tgid) {
    struct sl_thread_val t = {};

    if (bpf_map_lookup_elem(&threads, &tid)) return;
    t.tgid = tgid;
    t.last_in_ns = bpf_ktime_get_ns(); /* it is on CPU right now */
    bpf_get_current_comm(t.comm, sizeof(t.comm));
    bpf_map_update_elem(&threads, &tid, &t, BPF_NOEXIST);
}

#endif
