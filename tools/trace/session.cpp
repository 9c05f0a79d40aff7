#include <cstdio>
#include "session.hpp"

#include "accounting.hpp"
#include "bpf_session.hpp"
#include "error.hpp"
#include "fd_resolver.hpp"
#include "preflight.hpp"
#include "proc_stat.hpp"
#include "target.hpp"

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>
#include <unistd.h>

namespace sluice::trace {
namespace {

std::atomic<bool> g_stop{false};

void on_stop_signal(int) { g_stop = true; }

// While a command runs, Ctrl-C belongs to it (it is in our process group): we keep tracing and
// report once it exits. With -p, SIGINT/SIGTERM end the trace.
struct SignalGuard {
    explicit SignalGuard(bool attach_mode) {
        struct sigaction sa {};
        sa.sa_handler = attach_mode ? on_stop_signal : SIG_IGN;
        sigaction(SIGINT, &sa, &old_int_);
        sigaction(SIGTERM, &sa, &old_term_);
    }
    ~SignalGuard() {
        sigaction(SIGINT, &old_int_, nullptr);
        sigaction(SIGTERM, &old_term_, nullptr);
    }
    struct sigaction old_int_ {
    }, old_term_{};
};

std::unique_ptr<BpfSession> load_probe(const Options& opts, Methods& methods) {
    std::string lockdown = lockdown_mode();
    if (opts.no_kernel_reads) {
        methods.fallback_reason = "forced by --no-kernel-reads";
    } else if (lockdown == "confidentiality") {
        methods.fallback_reason = "lockdown=confidentiality refuses kernel reads";
    } else {
        try {
            return std::make_unique<BpfSession>(true);
        } catch (const TraceError& e) {
            // A host may refuse kernel reads without saying so in securityfs: fall back, and say so.
            methods.fallback_reason = std::string("the kernel-reads probe failed to load (") + e.what() + ")";
        }
    }
    return std::make_unique<BpfSession>(false);
}

const char* const no_kernel_reads_fd_class =
    "in the probe, from the syscall that created the fd (pipe/pipe2, socket, socketpair, accept/accept4, "
    "memfd_create; dup/dup2/dup3/fcntl F_DUPFD copy it, close/close_range drop it, fork copies the table, "
    "exec drops close-on-exec fds); open/openat/openat2/creat: /dev/null and /dev/zero by path in the probe, "
    "other paths in user space: stat(/proc/PID/fd/N) while the fd is still open, else stat(path), a relative "
    "one against the directory fd or the cwd it follows (from /proc at the start, then chdir/fchdir); "
    "fds open before tracing started: /proc/PID/fd when tracing starts; fds made otherwise (io_uring, "
    "eventfd, SCM_RIGHTS...): stat(/proc/PID/fd/N) on first use, unresolved if the process exited first";

// SLUICE_TRACE_NO_LATE_PROC=1: no /proc lookups after tracing started (the tests' way to check
// that the probe and the open paths classify a process that exits at once).
bool late_proc_lookups() {
    const char* v = std::getenv("SLUICE_TRACE_NO_LATE_PROC");
    return !v || !*v || *v == '0';
}

// The fds a process has when tracing starts: the probe never saw them created, so /proc tells
// it what they are, while the process certainly still has them. Seeded before the process is
// tracked: a change after that, the probe sees (and drops the seed); one before, the check
// after tracking starts finds. Returns what was seeded.
std::vector<std::pair<int32_t, FdInfo>> seed_fds(BpfSession& probe, pid_t pid) {
    auto fds = FdResolver::list(static_cast<uint32_t>(pid));
    for (const auto& [fd, info] : fds) {
        uint8_t flags = (info.writable ? SL_FLAG_FD_WRITABLE : 0) | (info.direct ? SL_FLAG_FD_DIRECT : 0) |
                        (info.cloexec ? SL_FDF_CLOEXEC : 0);
        probe.seed_fd(static_cast<uint32_t>(pid), fd, static_cast<uint8_t>(info.cls), flags);
    }
    return fds;
}

// After track(): withdraw the seeds of fds that changed before tracking started. Returns how
// many stand.
unsigned check_seeds(BpfSession& probe, pid_t pid, const std::vector<std::pair<int32_t, FdInfo>>& seeded) {
    unsigned n = 0;
    for (const auto& [fd, info] : seeded) {
        FdInfo now = FdResolver::resolve(static_cast<uint32_t>(pid), fd);
        if (now.cls != info.cls || now.dev != info.dev || now.ino != info.ino)
            probe.unseed_fd(static_cast<uint32_t>(pid), fd);
        else
            ++n;
    }
    return n;
}

} // namespace

Report run_trace(const Options& opts) {
    check_privileges();
    check_btf();
    ensure_tracefs();

    Report report;
    report.command = opts.command;
    auto probe = load_probe(opts, report.methods);
    bool kr = probe->kernel_reads();
    report.methods.variant = kr ? "kernel-reads" : "no-kernel-reads";
    report.methods.fd_class =
        kr ? "in the probe: task->files->fdt->fd[fd]->f_inode mode and rdev (BPF_CORE_READ)" : no_kernel_reads_fd_class;
    report.methods.user_sys =
        kr ? "on-CPU time split in the ratio of task_struct utime:stime (tick samples) summed at thread exit; "
             "/proc/PID/stat samples for processes still running"
           : "/proc/PID/stat utime/stime, last sample before exit (clock ticks)";

    SignalGuard signals(!opts.pids.empty());
    g_stop = false;
    FdResolver resolver([&probe](uint32_t tgid, int32_t fd) { return probe->fd_id(tgid, fd); }, late_proc_lookups());
    std::map<uint32_t, ProcTimes> proc_times; // last /proc sample per process
    auto sample = [&](uint32_t pid) {
        if (auto t = read_proc_times(static_cast<pid_t>(pid))) proc_times[pid] = *t;
    };
    unsigned seeded = 0;
    BpfSession::Handler handler = [&](const sl_event& e, const sl_open_event* open) {
        if (e.kind == SL_EV_FD_SEEN)
            resolver.seen(e);
        else if (open && e.kind == SL_EV_FD_OPEN)
            resolver.opened(*open);
        else if (open && e.kind == SL_EV_CHDIR)
            resolver.chdir(*open);
        if (e.kind == SL_EV_PROC_NEW) resolver.forked(e.tgid, e.parent);
        if (e.kind == SL_EV_PROC_NEW || e.kind == SL_EV_PROC_EXIT)
            sample(e.tgid); // at exit the zombie's /proc entry still holds its final times
    };

    auto start = std::chrono::steady_clock::now();
    std::optional<Target> target;
    if (!opts.command.empty()) {
        target.emplace(opts.command);
        auto seeds = kr ? decltype(seed_fds(*probe, 0)){} : seed_fds(*probe, target->pid());
        resolver.started(static_cast<uint32_t>(target->pid()));
        probe->track(target->pid(), getpid(), true);
        seeded += check_seeds(*probe, target->pid(), seeds);
        target->go();
    } else {
        for (pid_t pid : opts.pids) {
            if (!process_alive(pid)) throw TraceError("no running process with pid " + std::to_string(pid));
            auto seeds = kr ? decltype(seed_fds(*probe, 0)){} : seed_fds(*probe, pid);
            resolver.started(static_cast<uint32_t>(pid));
            probe->track(pid, 0);
            for (pid_t tid : list_threads(pid)) probe->track_thread(tid, pid);
            seeded += check_seeds(*probe, pid, seeds);
        }
        report.attached_pids.assign(opts.pids.begin(), opts.pids.end());
        // Tells a user (or a script) that what happens from now on is counted.
        std::fprintf(stderr, "sluice trace: attached to %zu process(es); tracing\n", opts.pids.size());
        std::fflush(stderr);
    }

    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    double last_sample = -1;
    for (;;) {
        probe->poll(50, handler);
        if (elapsed() - last_sample >= 0.2) { // /proc CPU samples, for the no-kernel-reads variant
            last_sample = elapsed();
            for (const auto& [pid, p] : probe->procs())
                if (!p.exited) sample(pid);
        }
        if (target) {
            if (target->poll_exit()) break;
        } else {
            if (g_stop || (opts.duration_s > 0 && elapsed() >= opts.duration_s)) break;
            bool any = false;
            for (const auto& [pid, p] : probe->procs()) any = any || (!p.exited && process_alive(static_cast<pid_t>(pid)));
            if (!any) break;
        }
    }
    probe->poll(0, handler); // events still queued
    report.wall_s = elapsed();
    if (target) report.exit_status = target->exit_status();

    if (!kr) {
        const auto& c = resolver.counts();
        report.methods.fd_class += fmt::format(" [this trace: {} fds from /proc at the start; opened: {} from "
                                               "/proc while open, {} by path after; {} from /proc on first "
                                               "use; {} unresolved]",
                                               seeded, c.opened_proc, c.opened_path, c.seen_proc, c.unresolved);
    }
    report.stages = build_stages(*probe, resolver, proc_times);
    report.summary = summarize(report.stages, opts.payload_bytes);
    if (opts.payload_bytes > 0) report.methods.payload = "given with --payload";
    return report;
}

} // namespace sluice::trace
