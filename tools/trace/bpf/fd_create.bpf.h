/* The syscalls that make, copy, change and close fds, as seen by the no-kernel-reads variant:
 * each fills or empties its row of the fd table (fd_table.bpf.h) at sys_exit, when its result
 * is known. The class comes from the syscall itself (pipe2 makes pipes, socket sockets), or
 * for open from the path, which is read from the process's own memory (a user read, allowed
 * under lockdown): /dev/null and /dev/zero are classified here, any other path goes to user
 * space in an SL_EV_FD_OPEN event, which can stat it even after the process has exited. */
#ifndef SLUICE_TRACE_FD_CREATE_BPF_H
#define SLUICE_TRACE_FD_CREATE_BPF_H

enum sl_fd_call_kind {
    SL_FC_OPEN = 1,    /* open, openat, openat2, creat: a = dirfd, ptr = path, flags */
    SL_FC_PIPE,        /* pipe, pipe2: ptr = int[2], flags */
    SL_FC_SOCKET,      /* socket, accept, accept4: flags (SOCK_CLOEXEC) */
    SL_FC_SOCKETPAIR,  /* ptr = int[2], flags */
    SL_FC_MEMFD,       /* flags (MFD_CLOEXEC) */
    SL_FC_DUP,         /* a = old fd; result is the new fd */
    SL_FC_DUP2,        /* dup2, dup3: a = old, b = new, flags (O_CLOEXEC) */
    SL_FC_FCNTL,       /* a = fd, b = cmd, flags = arg */
    SL_FC_IOCTL,       /* a = fd, b = FIOCLEX or FIONCLEX */
    SL_FC_CLOSE,       /* a = fd */
    SL_FC_CLOSE_RANGE, /* a = first, b = last, flags */
    SL_FC_CHDIR,       /* chdir: ptr = path; fchdir: a = fd (user space follows the cwd, so
			      * that it can stat a relative open path after the process is gone) */
};

/* An fd syscall between enter and exit, per thread. */
struct sl_fd_call {
    __u32 kind;
    __s32 a;
    __s32 b;
    __u32 pad;
    __u64 flags;
    __u64 ptr;
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16384);
    __type(key, __u32);
    __type(value, struct sl_fd_call);
} fd_calls SEC(".maps");

/* Arguments of the fd syscalls, normalised; false for any other syscall. */
static __always_inline bool sl_fd_call_of(long nr, __u64 a0, __u64 a1, __u64 a2, __u64 a3, struct sl_fd_call* c) {
    switch (nr) {
#ifdef SL_NR_open
    case SL_NR_open:
        c->kind = SL_FC_OPEN;
        c->a = SL_AT_FDCWD;
        c->ptr = a0;
        c->flags = a1;
        return true;
#endif
#ifdef SL_NR_creat
    case SL_NR_creat:
        c->kind = SL_FC_OPEN;
        c->a = SL_AT_FDCWD;
        c->ptr = a0;
        c->flags = SL_O_CREAT | SL_O_WRONLY | SL_O_TRUNC;
        return true;
#endif
    case SL_NR_openat:
        c->kind = SL_FC_OPEN;
        c->a = (__s32)a0;
        c->ptr = a1;
        c->flags = a2;
        return true;
    case SL_NR_openat2:
        /* struct open_how starts with the u64 flags; it is in the caller's memory. */
        c->kind = SL_FC_OPEN;
        c->a = (__s32)a0;
        c->ptr = a1;
        if (bpf_probe_read_user(&c->flags, sizeof(c->flags), (void*)a2)) c->flags = 0;
        return true;
#ifdef SL_NR_pipe
    case SL_NR_pipe:
        c->kind = SL_FC_PIPE;
        c->ptr = a0;
        c->flags = 0;
        return true;
#endif
    case SL_NR_pipe2:
        c->kind = SL_FC_PIPE;
        c->ptr = a0;
        c->flags = a1;
        return true;
    case SL_NR_socket:
        c->kind = SL_FC_SOCKET;
        c->flags = a1;
        return true;
    case SL_NR_accept:
        c->kind = SL_FC_SOCKET;
        c->flags = 0;
        return true;
    case SL_NR_accept4:
        c->kind = SL_FC_SOCKET;
        c->flags = a3;
        return true;
    case SL_NR_socketpair:
        c->kind = SL_FC_SOCKETPAIR;
        c->ptr = a3;
        c->flags = a1;
        return true;
    case SL_NR_memfd_create:
        c->kind = SL_FC_MEMFD;
        c->flags = a1;
        return true;
    case SL_NR_dup:
        c->kind = SL_FC_DUP;
        c->a = (__s32)a0;
        return true;
#ifdef SL_NR_dup2
    case SL_NR_dup2:
        c->kind = SL_FC_DUP2;
        c->a = (__s32)a0;
        c->b = (__s32)a1;
        c->flags = 0;
        return true;
#endif
    case SL_NR_dup3:
        c->kind = SL_FC_DUP2;
        c->a = (__s32)a0;
        c->b = (__s32)a1;
        c->flags = a2;
        return true;
    case SL_NR_fcntl:
        c->kind = SL_FC_FCNTL;
        c->a = (__s32)a0;
        c->b = (__s32)a1;
        c->flags = a2;
        return true;
    case SL_NR_ioctl:
        if ((__u32)a1 != SL_FIOCLEX && (__u32)a1 != SL_FIONCLEX) return false;
        c->kind = SL_FC_IOCTL;
        c->a = (__s32)a0;
        c->b = (__s32)a1;
        return true;
    case SL_NR_close:
        c->kind = SL_FC_CLOSE;
        c->a = (__s32)a0;
        return true;
    case SL_NR_chdir:
        c->kind = SL_FC_CHDIR;
        c->a = SL_AT_FDCWD;
        c->ptr = a0;
        return true;
    case SL_NR_fchdir:
        c->kind = SL_FC_CHDIR;
        c->a = (__s32)a0;
        c->ptr = 0;
        return true;
    case SL_NR_close_range:
        c->kind = SL_FC_CLOSE_RANGE;
        c->a = (__s32)a0;
        c->b = (__s32)a1;
        c->flags = a2;
        return true;
    default: return false;
    }
}

SEC("tracepoint/raw_syscalls/sys_enter")
int sl_fd_sys_enter(struct trace_event_raw_sys_enter* ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    __u32 tid = (__u32)pt;
    struct sl_fd_call c = {};
    /* All four up front, for the same verifier reason as in sl_sys_enter. */
    __u64 a0 = ctx->args[0], a1 = ctx->args[1], a2 = ctx->args[2], a3 = ctx->args[3];

    if (!sl_fd_traced(pt >> 32) || !sl_fd_call_of(ctx->id, a0, a1, a2, a3, &c)) return 0;
    bpf_map_update_elem(&fd_calls, &tid, &c, BPF_ANY);
    return 0;
}

static __always_inline __u8 sl_cloexec_if(bool set) { return set ? SL_FDF_CLOEXEC : 0; }

/* pipe2/socketpair wrote the two fds into the caller's int[2]. */
static __always_inline void sl_fd_pair(__u32 tgid, __u64 ptr, __u8 cls, __u8 cloexec) {
    __s32 fd[2];

    if (bpf_probe_read_user(fd, sizeof(fd), (void*)ptr))
        return; /* unreadable: both stay unknown and are looked up on first use */
    sl_fd_put(tgid, fd[0], cls, cloexec | (cls == SL_CLS_SOCKET ? SL_FLAG_FD_WRITABLE : 0), 0);
    sl_fd_put(tgid, fd[1], cls, cloexec | SL_FLAG_FD_WRITABLE, 0);
}

/* newfd names what oldfd names; close-on-exec is per fd, not copied. An oldfd the table does
 * not know leaves newfd to be looked up on first use. */
static __always_inline void sl_fd_copy(__u32 tgid, __s32 oldfd, __s32 newfd, __u8 cloexec) {
    struct sl_fd_table* t = sl_fd_tab(tgid);
    struct sl_fd_val* s = t ? sl_fd_known(t, tgid, oldfd) : NULL;

    if (!s || !sl_slot_live(s)) {
        sl_fd_drop(tgid, newfd);
        return;
    }
    sl_fd_put(tgid, newfd, s->cls, (s->flags & ~(SL_FDF_CLOEXEC | SL_FDF_LIVE)) | cloexec, s->id);
}

/* fcntl F_SETFD / F_SETFL, ioctl FIOCLEX. On an fd not seen yet only close-on-exec is kept. */
static __always_inline void sl_fd_set_flag(__u32 tgid, __s32 fd, __u8 flag, bool on) {
    struct sl_fd_table* t = sl_fd_tab(tgid);
    struct sl_fd_val* s = t ? sl_fd_known(t, tgid, fd) : NULL;

    if (!s || (!sl_slot_live(s) && flag != SL_FDF_CLOEXEC)) return;
    s->flags = on ? (s->flags | flag) : (s->flags & ~flag);
}

/* path holds n bytes with the NUL; want is a string literal. A loop, not memcmp: BPF has no
 * libc, and clang does not inline memcmp for it. */
#define sl_path_is(path, n, want) ((n) == sizeof(want) && sl_same(path, want, sizeof(want)))

static __always_inline bool sl_same(const char* a, const char* b, int n) {
#pragma unroll
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* The id user space knows fd's path by (it was opened by path), or 0. */
static __always_inline __u32 sl_fd_id_of(__u32 tgid, __s32 fd) {
    struct sl_fd_table* t = fd >= 0 ? sl_fd_tab(tgid) : NULL;
    struct sl_fd_val* s = t ? sl_fd_known(t, tgid, fd) : NULL;

    return s && sl_slot_live(s) ? s->id : 0;
}

/* chdir(path) or fchdir(fd) succeeded: tell user space, which keeps each process's cwd. */
static __always_inline void sl_fd_chdir(__u32 tgid, struct sl_fd_call* c) {
    struct sl_open_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    long n = 0;

    if (!e) return;
    if (c->ptr) {
        n = bpf_probe_read_user_str(e->path, sizeof(e->path), (void*)c->ptr);
        if (n < 0) n = 0;
    }
    e->ev.kind = SL_EV_CHDIR;
    e->ev.tgid = tgid;
    e->ev.tid = (__u32)bpf_get_current_pid_tgid();
    e->ev.fd = c->a;
    e->ev.id = c->ptr ? 0 : sl_fd_id_of(tgid, c->a);
    e->ev.flags = 0;
    e->ev.parent = 0;
    e->ev.pad = 0;
    bpf_get_current_comm(e->ev.comm, sizeof(e->ev.comm));
    e->dirfd = SL_AT_FDCWD;
    e->dir_id = 0;
    e->path_len = (__s32)n;
    e->pad = 0;
    bpf_ringbuf_submit(e, 0);
}

/* open returned fd: its flags are known here, and its class too when the path names /dev/null or
 * /dev/zero, and user space gets the path for everything else. */
static __always_inline void sl_fd_opened(__u32 tgid, __s32 fd, struct sl_fd_call* c) {
    __u8 flags = sl_cloexec_if(c->flags & SL_O_CLOEXEC);
    struct sl_open_event* e;
    long n;

    if ((c->flags & SL_O_ACCMODE) != 0) flags |= SL_FLAG_FD_WRITABLE;
    if (c->flags & SL_O_DIRECT) flags |= SL_FLAG_FD_DIRECT;
    e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        sl_fd_drop(tgid, fd); /* first use will ask /proc instead */
        return;
    }
    n = bpf_probe_read_user_str(e->path, sizeof(e->path), (void*)c->ptr);
    if (n <= 0) {
        bpf_ringbuf_discard(e, 0);
        sl_fd_drop(tgid, fd);
        return;
    }
    if (sl_path_is(e->path, n, "/dev/null")) {
        bpf_ringbuf_discard(e, 0);
        sl_fd_put(tgid, fd, SL_CLS_DEVNULL, flags, 0);
        return;
    }
    if (sl_path_is(e->path, n, "/dev/zero")) {
        bpf_ringbuf_discard(e, 0);
        sl_fd_put(tgid, fd, SL_CLS_DEVZERO, flags, 0);
        return;
    }
    e->ev.kind = SL_EV_FD_OPEN;
    e->ev.tgid = tgid;
    e->ev.tid = (__u32)bpf_get_current_pid_tgid();
    e->ev.fd = fd;
    e->ev.id = sl_new_id();
    e->ev.flags = flags & (SL_FLAG_FD_WRITABLE | SL_FLAG_FD_DIRECT);
    e->ev.parent = 0;
    e->ev.pad = 0;
    bpf_get_current_comm(e->ev.comm, sizeof(e->ev.comm));
    e->dirfd = c->a;
    e->dir_id = c->a == SL_AT_FDCWD ? 0 : sl_fd_id_of(tgid, c->a);
    e->path_len = (__s32)n;
    e->pad = 0;
    /* The entry first: user space checks it when the event arrives. */
    sl_fd_put(tgid, fd, SL_CLS_UNKNOWN, flags, e->ev.id);
    bpf_ringbuf_submit(e, 0);
}

SEC("tracepoint/raw_syscalls/sys_exit")
int sl_fd_sys_exit(struct trace_event_raw_sys_exit* ctx) {
    __u64 pt = bpf_get_current_pid_tgid();
    __u32 tgid = pt >> 32, tid = (__u32)pt;
    struct sl_fd_call* c = bpf_map_lookup_elem(&fd_calls, &tid);
    long ret = ctx->ret;

    if (!c) return 0;
    switch (c->kind) {
    case SL_FC_OPEN:
        if (ret >= 0) sl_fd_opened(tgid, (__s32)ret, c);
        break;
    case SL_FC_PIPE:
        if (ret == 0) sl_fd_pair(tgid, c->ptr, SL_CLS_PIPE, sl_cloexec_if(c->flags & SL_O_CLOEXEC));
        break;
    case SL_FC_SOCKETPAIR:
        if (ret == 0) sl_fd_pair(tgid, c->ptr, SL_CLS_SOCKET, sl_cloexec_if(c->flags & SL_O_CLOEXEC));
        break;
    case SL_FC_SOCKET:
        if (ret >= 0) sl_fd_put(tgid, (__s32)ret, SL_CLS_SOCKET, SL_FLAG_FD_WRITABLE | sl_cloexec_if(c->flags & SL_O_CLOEXEC), 0);
        break;
    case SL_FC_MEMFD: /* a shmem regular file */
        if (ret >= 0) sl_fd_put(tgid, (__s32)ret, SL_CLS_FILE, SL_FLAG_FD_WRITABLE | sl_cloexec_if(c->flags & SL_MFD_CLOEXEC), 0);
        break;
    case SL_FC_DUP:
        if (ret >= 0) sl_fd_copy(tgid, c->a, (__s32)ret, 0);
        break;
    case SL_FC_DUP2:
        if (ret >= 0 && c->a != c->b) sl_fd_copy(tgid, c->a, c->b, sl_cloexec_if(c->flags & SL_O_CLOEXEC));
        break;
    case SL_FC_FCNTL:
        if (ret < 0) break;
        if (c->b == SL_F_DUPFD || c->b == SL_F_DUPFD_CLOEXEC)
            sl_fd_copy(tgid, c->a, (__s32)ret, sl_cloexec_if(c->b == SL_F_DUPFD_CLOEXEC));
        else if (c->b == SL_F_SETFD)
            sl_fd_set_flag(tgid, c->a, SL_FDF_CLOEXEC, c->flags & SL_FD_CLOEXEC);
        else if (c->b == SL_F_SETFL) /* dd turns O_DIRECT off for a short last block */
            sl_fd_set_flag(tgid, c->a, SL_FLAG_FD_DIRECT, c->flags & SL_O_DIRECT);
        break;
    case SL_FC_IOCTL:
        if (ret == 0) sl_fd_set_flag(tgid, c->a, SL_FDF_CLOEXEC, (__u32)c->b == SL_FIOCLEX);
        break;
    case SL_FC_CLOSE: /* Linux frees the fd even when close reports an error */ sl_fd_drop(tgid, c->a); break;
    case SL_FC_CHDIR:
        if (ret == 0) sl_fd_chdir(tgid, c);
        break;
    case SL_FC_CLOSE_RANGE:
        if (ret == 0 && (__u32)c->a <= (__u32)c->b)
            sl_fd_close_range(tgid, (__u32)c->a, (__u32)c->b, c->flags & SL_CLOSE_RANGE_CLOEXEC);
        break;
    }
    bpf_map_delete_elem(&fd_calls, &tid);
    return 0;
}

#endif
