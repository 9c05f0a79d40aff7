/* io_uring accounting: a request is seen at submission (opcode), its files as it takes them
 * (io_uring_file_get) and its bytes at completion (res), joined on the request pointer.
 * Runs in the submitter or in its io-wq worker (iou-wrk-PID): same process, same fd table. */
#ifndef SLUICE_TRACE_URING_BPF_H
#define SLUICE_TRACE_URING_BPF_H

#define SL_CQE_F_MORE (1U << 1)
#define SL_CQE_F_NOTIF (1U << 3)
#define SL_NOTIF_USAGE_ZC_COPIED (1U << 31)

/* An io_uring request between submission and completion. */
struct sl_req {
    struct sl_flow_key key;
    __u32 nfiles;
};

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

SEC("tracepoint/io_uring/io_uring_submit_req")
int sl_uring_submit(struct trace_event_raw_io_uring_submit_req* ctx) {
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct sl_proc_val* p = sl_proc(tgid);
    struct sl_req r = {};
    __u64 req = (__u64)ctx->req, ring = (__u64)ctx->ctx;

    if (!p) return 0;
    r.key.tgid = tgid;
    r.key.op = SL_OP_URING | ctx->opcode;
    r.key.cls_b = SL_CLS_NONE;
    bpf_map_update_elem(&reqs, &req, &r, BPF_ANY);
    bpf_map_update_elem(&rings, &ring, &tgid, BPF_ANY);
    return 0;
}

/* Fires for each non-fixed file a request takes: sqe->fd first, then (IORING_OP_SPLICE/TEE)
 * the splice_fd_in source. */
SEC("tracepoint/io_uring/io_uring_file_get")
int sl_uring_file_get(struct trace_event_raw_io_uring_file_get* ctx) {
    __u64 req = (__u64)ctx->req;
    struct sl_req* r = bpf_map_lookup_elem(&reqs, &req);
    __u8 ignored = 0;

    if (!r || !sl_proc(r->key.tgid)) return 0;
    if (r->nfiles == 0)
        sl_side(r->key.tgid, ctx->fd, &r->key.cls_a, &r->key.id_a, &r->key.flags);
    else if (r->nfiles == 1)
        sl_side(r->key.tgid, ctx->fd, &r->key.cls_b, &r->key.id_b, &ignored);
    r->nfiles++;
    return 0;
}

/* SEND_ZC notification: its own request never went through submit_req. */
static __always_inline void sl_uring_notif(__u64 ring, unsigned int cflags, int res) {
    __u32* tgid = bpf_map_lookup_elem(&rings, &ring);
    struct sl_proc_val* p;

    if (!tgid || !(cflags & SL_CQE_F_NOTIF)) return;
    p = sl_proc(*tgid);
    if (!p) return;
    __sync_fetch_and_add(&p->zc_notif, 1);
    if ((__u32)res & SL_NOTIF_USAGE_ZC_COPIED) __sync_fetch_and_add(&p->zc_notif_copied, 1);
}

SEC("tracepoint/io_uring/io_uring_complete")
int sl_uring_complete(struct trace_event_raw_io_uring_complete* ctx) {
    __u64 req = (__u64)ctx->req, ring = (__u64)ctx->ctx;
    struct sl_req* r = bpf_map_lookup_elem(&reqs, &req);
    unsigned int cflags = ctx->cflags;
    int res = ctx->res;

    if (!r) {
        sl_uring_notif(ring, cflags, res);
        return 0;
    }
    if (r->key.cls_a == SL_CLS_UNKNOWN) sl_fixed_side(ctx->req, r->nfiles, &r->key.cls_a, &r->key.flags);
    sl_uring_fd_result(r->key.tgid, (__u8)(r->key.op & 0xff), res);
    sl_flow_add(&r->key, res);
    if (!(cflags & SL_CQE_F_MORE)) bpf_map_delete_elem(&reqs, &req);
    return 0;
}

#endif
