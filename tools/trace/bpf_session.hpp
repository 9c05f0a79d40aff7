// The loaded probe: one of the two skeletons (with or without kernel reads), attached to its
// tracepoints, with typed access to the maps the accounting reads. Destroying it detaches.
#pragma once
#include "trace.h"

#include <functional>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

struct bpf_object;
struct ring_buffer;

namespace sluice::trace {

class BpfSession {
public:
    // kernel_reads=false loads the variant built with -DSL_NO_KERNEL_READS. Throws TraceError.
    explicit BpfSession(bool kernel_reads);
    ~BpfSession();
    BpfSession(const BpfSession&) = delete;
    BpfSession& operator=(const BpfSession&) = delete;

    bool kernel_reads() const { return kernel_reads_; }
    // Trace this process (and, through task_newtask, everything it starts).
    // wait_exec: count nothing until it calls exec (a command forked by the tracer).
    void track(pid_t tgid, pid_t ppid, bool wait_exec = false);
    void track_thread(pid_t tid, pid_t tgid);

    // One ring buffer event; open is set for SL_EV_FD_OPEN and SL_EV_CHDIR (it holds ev).
    using Handler = std::function<void(const sl_event& ev, const sl_open_event* open)>;
    // Drain ring buffer events into handler; waits up to timeout_ms for the first one.
    void poll(int timeout_ms, const Handler& handler);

    std::vector<std::pair<sl_flow_key, sl_flow_val>> flows() const;
    std::vector<std::pair<uint32_t, sl_proc_val>> procs() const;
    std::vector<std::pair<uint32_t, sl_thread_val>> threads() const;
    // No-kernel-reads probe: the id its fd table holds for (tgid, fd) now, 0 if none (an
    // event's fd still is the incarnation the event named while this returns its id).
    uint32_t fd_id(uint32_t tgid, int32_t fd) const;
    // No-kernel-reads probe: what an fd a process has before tracing starts is (from /proc).
    // The probe applies it until the process changes that fd. flags: SL_FLAG_FD_*, SL_FDF_CLOEXEC.
    void seed_fd(uint32_t tgid, int32_t fd, uint8_t cls, uint8_t flags);
    // Withdraw a seed that turned out wrong (the fd changed while /proc was read).
    void unseed_fd(uint32_t tgid, int32_t fd);

private:
    int map_fd(const char* name) const;

    bool kernel_reads_;
    bpf_object* obj_ = nullptr;
    std::function<void()> destroy_; // the skeleton's __destroy for the variant that loaded
    ring_buffer* rb_ = nullptr;
    const Handler* handler_ = nullptr;
};

} // namespace sluice::trace
