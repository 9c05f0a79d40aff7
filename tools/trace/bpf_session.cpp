#include <ctime>
#include "bpf_session.hpp"

#include "error.hpp"
#include "trace.skel.h"
#include "trace_nokr.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace sluice::trace {
namespace {

// open + load + attach one skeleton type; both variants have the same maps and programs.
template <class Skel> bpf_object* load_skeleton(Skel* (*open)(), int (*load)(Skel*), int (*attach)(Skel*), void (*destroy)(Skel*),
                                                std::function<void()>& destroy_out) {
    Skel* s = open();
    if (!s) throw_errno("opening the BPF object", errno);
    destroy_out = [s, destroy] { destroy(s); };
    if (int err = load(s); err) throw_errno("loading the BPF programs (the kernel verifier refused them)", -err);
    if (int err = attach(s); err) throw_errno("attaching the BPF programs to tracepoints", -err);
    return s->obj;
}

template <class K, class V> std::vector<std::pair<K, V>> dump(int fd) {
    std::vector<std::pair<K, V>> out;
    K key{}, next{};
    const K* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        V val{};
        if (bpf_map_lookup_elem(fd, &next, &val) == 0) out.emplace_back(next, val);
        key = next;
        prev = &key;
    }
    return out;
}

int on_event(void* ctx, void* data, size_t size) {
    // ctx is &BpfSession::handler_, which points at the handler of the poll() in progress.
    auto* const* handler = static_cast<const BpfSession::Handler* const*>(ctx);
    if (size < sizeof(sl_event) || !*handler || !**handler) return 0;
    const auto* ev = static_cast<const sl_event*>(data);
    const sl_open_event* open = nullptr;
    if (ev->kind == SL_EV_FD_OPEN || ev->kind == SL_EV_CHDIR) {
        if (size < sizeof(sl_open_event)) return 0;
        open = static_cast<const sl_open_event*>(data);
    }
    (**handler)(*ev, open);
    return 0;
}

// libbpf prints verifier logs on stderr; they would bury the one-line error (and a failed
// kernel-reads load is followed by the fallback anyway). SLUICE_TRACE_VERBOSE=1 shows them.
int print_libbpf(enum libbpf_print_level level, const char* fmt, va_list args) {
    const char* v = std::getenv("SLUICE_TRACE_VERBOSE");
    if (!v || !*v || *v == '0' || level == LIBBPF_DEBUG) return 0;
    return vfprintf(stderr, fmt, args);
}

} // namespace

BpfSession::BpfSession(bool kernel_reads) : kernel_reads_(kernel_reads) {
    libbpf_set_print(print_libbpf);
    try {
        if (kernel_reads)
            obj_ = load_skeleton<trace_bpf>(trace_bpf__open, trace_bpf__load, trace_bpf__attach, trace_bpf__destroy, destroy_);
        else
            obj_ = load_skeleton<trace_nokr_bpf>(trace_nokr_bpf__open, trace_nokr_bpf__load, trace_nokr_bpf__attach,
                                                 trace_nokr_bpf__destroy, destroy_);
    } catch (...) {
        if (destroy_) destroy_();
        throw;
    }
    rb_ = ring_buffer__new(map_fd("events"), on_event, &handler_, nullptr);
    if (!rb_) {
        int err = errno;
        destroy_();
        throw_errno("creating the ring buffer reader", err);
    }
}

BpfSession::~BpfSession() {
    if (rb_) ring_buffer__free(rb_);
    if (destroy_) destroy_();
}

int BpfSession::map_fd(const char* name) const {
    bpf_map* m = bpf_object__find_map_by_name(obj_, name);
    if (!m) throw TraceError(std::string("BPF map '") + name + "' missing from the object");
    return bpf_map__fd(m);
}

void BpfSession::track(pid_t tgid, pid_t ppid, bool wait_exec) {
    sl_proc_val p{};
    p.ppid = static_cast<uint32_t>(ppid);
    p.wait_exec = wait_exec ? 1 : 0;
    uint32_t key = static_cast<uint32_t>(tgid);
    if (bpf_map_update_elem(map_fd("procs"), &key, &p, BPF_NOEXIST) != 0 && errno != EEXIST)
        throw_errno("adding pid " + std::to_string(tgid) + " to the trace", errno);
    track_thread(tgid, tgid);
}

void BpfSession::track_thread(pid_t tid, pid_t tgid) {
    sl_thread_val t{};
    t.tgid = static_cast<uint32_t>(tgid);
    // The thread may be on a CPU right now and stay there until it exits: start its slice
    // here (bpf_ktime_get_ns is CLOCK_MONOTONIC), or its CPU time would read 0. If it is not
    // running, its next switch-in overwrites this.
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    t.last_in_ns = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
    uint32_t key = static_cast<uint32_t>(tid);
    bpf_map_update_elem(map_fd("threads"), &key, &t, BPF_NOEXIST);
}

void BpfSession::poll(int timeout_ms, const Handler& handler) {
    handler_ = &handler;
    // ring_buffer__new captured &handler_, so the callback sees the current handler.
    int n = ring_buffer__poll(rb_, timeout_ms);
    handler_ = nullptr;
    if (n < 0 && n != -EINTR) throw_errno("reading the ring buffer", -n);
}

std::vector<std::pair<sl_flow_key, sl_flow_val>> BpfSession::flows() const {
    return dump<sl_flow_key, sl_flow_val>(map_fd("flows"));
}

std::vector<std::pair<uint32_t, sl_proc_val>> BpfSession::procs() const { return dump<uint32_t, sl_proc_val>(map_fd("procs")); }

uint32_t BpfSession::fd_id(uint32_t tgid, int32_t fd) const {
    auto table = std::make_unique<sl_fd_table>();
    if (fd < 0 || bpf_map_lookup_elem(map_fd("fdtabs"), &tgid, table.get()) != 0) return 0;
    if (fd < SL_FD_SLOTS) return table->fd[fd].id;
    sl_fd_key k{tgid, fd};
    sl_fd_high h{};
    return bpf_map_lookup_elem(map_fd("fds_high"), &k, &h) == 0 && h.inc == table->inc ? h.v.id : 0;
}

void BpfSession::seed_fd(uint32_t tgid, int32_t fd, uint8_t cls, uint8_t flags) {
    if (fd < 0 || fd >= SL_FD_SLOTS) return; // high fds are looked up on first use
    sl_fd_key k{tgid, fd};
    sl_fd_val v{};
    v.cls = cls;
    v.flags = flags;
    bpf_map_update_elem(map_fd("seeds"), &k, &v, BPF_ANY);
}

void BpfSession::unseed_fd(uint32_t tgid, int32_t fd) {
    sl_fd_key k{tgid, fd};
    bpf_map_delete_elem(map_fd("seeds"), &k);
}

std::vector<std::pair<uint32_t, sl_thread_val>> BpfSession::threads() const {
    return dump<uint32_t, sl_thread_val>(map_fd("threads"));
}

} // namespace sluice::trace
