/* Processes, threads and CPU: which tasks are traced (a traced process's children and threads
 * are), their on-CPU time between sched_switch events and their context switches. */
#ifndef SLUICE_TRACE_SCHED_BPF_H
#define SLUICE_TRACE_SCHED_BPF_H

#define SL_CLONE_THREAD 0x00010000ULL

SEC("tracepoint/sched/sched_switch")
int sl_sched_switch(struct trace_event_raw_sched_switch* ctx) {
    __u64 now = bpf_ktime_get_ns();
    __u32 prev = ctx->prev_pid, next = ctx->next_pid;
    struct sl_thread_val* t;

    t = bpf_map_lookup_elem(&threads, &prev);
    if (t && prev) {
        struct sl_proc_val* p = sl_proc(t->tgid);

        if (t->last_in_ns) {
            __u64 d = now - t->last_in_ns;

            __sync_fetch_and_add(&t->cpu_ns, d);
            if (p) __sync_fetch_and_add(&p->cpu_ns, d);
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
    if (t && next) t->last_in_ns = now;
    return 0;
}

SEC("tracepoint/task/task_newtask")
int sl_task_newtask(struct trace_event_raw_task_newtask* ctx) {
    __u32 parent = bpf_get_current_pid_tgid() >> 32;
    __u32 pid = ctx->pid;
    struct sl_proc_val* pp = sl_proc(parent);
    struct sl_thread_val t = {};

    if (!pp) return 0;
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
        sl_emit(SL_EV_PROC_NEW, pid, pid, -1, 0, parent);
    }
    /* Threads, io-wq workers (iou-wrk) and SQPOLL threads (iou-sqp) are created with
	 * CLONE_THREAD and no sched_process_fork: this is where they are charged to the process. */
    bpf_map_update_elem(&threads, &pid, &t, BPF_ANY);
    return 0;
}

SEC("tracepoint/sched/sched_process_exec")
int sl_process_exec(struct trace_event_raw_sched_process_exec* ctx) {
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct sl_proc_val* p = bpf_map_lookup_elem(&procs, &tgid);

    if (!p) return 0;
    p->wait_exec = 0;
    bpf_get_current_comm(p->comm, sizeof(p->comm));
    return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int sl_process_exit(struct trace_event_raw_sched_process_template* ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    __u32 tgid = pt >> 32, tid = (__u32)pt;
    struct sl_proc_val* p = sl_proc(tgid);
    struct sl_thread_val* th;

    if (!p) return 0;
    /* Close the slice the thread is running now: user space reads the totals when the exit
	 * event arrives, before the dying task's last sched_switch, so a process that never got
	 * switched out would otherwise show no CPU time at all. */
    th = bpf_map_lookup_elem(&threads, &tid);
    if (th && th->last_in_ns) {
        __u64 d = bpf_ktime_get_ns() - th->last_in_ns;

        __sync_fetch_and_add(&th->cpu_ns, d);
        __sync_fetch_and_add(&p->cpu_ns, d);
        th->last_in_ns = 0;
    }
    sl_exit_times(p);
    if (tid == tgid) {
        bpf_get_current_comm(p->comm, sizeof(p->comm));
        p->exited = 1;
        sl_emit(SL_EV_PROC_EXIT, tgid, tid, -1, 0, 0);
    }
    return 0;
}

#endif
