"""Where the CPU goes during one wrk run of idle.py (--perf-dir): system-wide `perf record -g`
and `perf stat` (software events: this VM exposes no hardware counters), /proc/vmstat deltas
(reclaim: pgscan, pgsteal, kswapd) and per-CPU busy time from /proc/stat, taken over the same
window in the middle of the run. Each profiler is bounded by its own `sleep`. With --counters
(no record): perf stat counts tracepoints too (scheduler switches and wake-ups, interrupts,
timers, softirqs, TLB flushes, io_uring completions) and /proc/softirqs per CPU, cheap enough
to run in every wrk window of every server."""
import os
import subprocess
import time
from pathlib import Path

STAT_EVENTS = "task-clock,context-switches,cpu-migrations,page-faults,major-faults"
TRACE_EVENTS = ("sched:sched_switch,sched:sched_wakeup,sched:sched_migrate_task,irq:irq_handler_entry,"
                "irq:softirq_entry,irq_vectors:local_timer_entry,irq_vectors:reschedule_entry,"
                "irq_vectors:call_function_entry,irq_vectors:call_function_single_entry,timer:hrtimer_expire_entry,"
                "timer:timer_expire_entry,tlb:tlb_flush,io_uring:io_uring_complete,io_uring:io_uring_task_work_run,"
                "io_uring:io_uring_poll_arm,net:netif_receive_skb,tcp:tcp_retransmit_skb")
VMSTAT_KEYS = ("pgscan", "pgsteal", "kswapd", "pgfault", "pgmajfault", "compact", "slabs_scanned", "allocstall",
               "pgrefill", "pgactivate", "pgdeactivate", "numa", "thp")


def vmstat():
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        k, v = line.split()
        if k.startswith(VMSTAT_KEYS):
            out[k] = int(v)
    return out


def softirqs():
    # {kind: [count per CPU]}
    out = {}
    for line in Path("/proc/softirqs").read_text().splitlines()[1:]:
        f = line.split()
        out[f[0].rstrip(":")] = list(map(int, f[1:]))
    return out


def cpu_times():
    # per CPU: (busy, total) jiffies; busy = everything but idle and iowait
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        f = line.split()
        if f[0].startswith("cpu") and f[0] != "cpu":
            v = list(map(int, f[1:]))
            out[f[0]] = {"user": v[0] + v[1], "system": v[2], "irq": v[5], "softirq": v[6],
                         "idle": v[3] + v[4], "steal": v[7], "total": sum(v[:8])}
    return out


def kernel_threads():
    """The kernel's own threads (kworkers, ksoftirqd, kswapd, rcu...): children of kthreadd."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "stat").read_text().rsplit(")", 1)[1].split()[1] == "2":
                    out.append(int(d.name))
            except (OSError, IndexError):
                pass
    return out


def kernel_threads_cpu():
    """{pid: (name, utime + stime in ticks)} of the kernel's threads, to name the ones busy in a window."""
    out = {}
    for pid in kernel_threads():
        try:
            head, tail = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
            f = tail.split()
            out[pid] = (head.split("(", 1)[1], int(f[11]) + int(f[12]))
        except (OSError, IndexError, ValueError):
            pass
    return out


def proc_cpu(pids):
    # utime + stime in clock ticks, summed over the processes still there (the kernel's own
    # accounting, to set beside the sampler's count)
    total = 0
    for pid in pids:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])
        except (OSError, IndexError, ValueError):
            pass
    return total


def profile(directory, tag, delay, seconds, groups=None, record=True):
    """Start the profilers after `delay` seconds; returns a function that waits and reports.
    groups: name -> pids whose utime + stime over the window is reported (in seconds).
    record=False: no perf record, and perf stat counts the tracepoints too."""
    groups = dict(groups or {}, kthreads=kernel_threads())
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    time.sleep(delay)
    v0, c0, s0, t0 = vmstat(), cpu_times(), softirqs(), time.monotonic()
    g0 = {name: proc_cpu(pids) for name, pids in groups.items()}
    k0 = kernel_threads_cpu()
    procs = []
    if record:
        procs.append(subprocess.Popen(["perf", "record", "-a", "-g", "-q", "-o", str(d / f"{tag}.data"), "--",
                                       "sleep", str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    events = STAT_EVENTS if record else STAT_EVENTS + "," + TRACE_EVENTS
    procs.append(subprocess.Popen(["perf", "stat", "-a", "-x,", "-e", events, "-o", str(d / f"{tag}.stat"), "--",
                                   "sleep", str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def finish():
        for p in procs:
            p.wait(timeout=seconds + 120)
        v1, c1, s1, t1 = vmstat(), cpu_times(), softirqs(), time.monotonic()
        hz = os.sysconf("SC_CLK_TCK")
        g1 = {name: proc_cpu(pids) for name, pids in groups.items()}
        k1 = kernel_threads_cpu()
        busy = {}  # kernel threads by name, CPU seconds in the window; a kworker by the workqueue
        for pid, (name, t) in k1.items():  # it last ran ("kworker/0:1-events" -> "kworker-events")
            if pid in k0 and t > k0[pid][1]:
                key = "kworker" + ("-" + name.split("-", 1)[1] if "-" in name else "") if name.startswith("kworker") else name
                busy[key] = round(busy.get(key, 0) + (t - k0[pid][1]) / hz, 2)
        stat = {}
        for line in (d / f"{tag}.stat").read_text().splitlines():
            f = line.split(",")
            if len(f) > 2 and f[2]:
                stat[f[2]] = f[0]
        cpus = {}
        for cpu in c0:
            dt = c1[cpu]["total"] - c0[cpu]["total"] or 1
            cpus[cpu] = {k: round((c1[cpu][k] - c0[cpu][k]) / dt, 3) for k in ("user", "system", "irq", "softirq", "idle", "steal")}
            # the ticks the kernel accounted per second of this window (hz when every tick was
            # accounted): time the vCPU did not run and the guest was not told of (no steal)
            # shows as fewer
            cpus[cpu]["accounted_per_s"] = round(dt / (t1 - t0), 1)
        return {"seconds": round(t1 - t0, 2), "perf_stat": stat, "cpu_share": cpus,
                "cpu_seconds": {name: (g1[name] - g0[name]) / hz for name in groups},
                "kernel_threads_busy": dict(sorted(busy.items(), key=lambda kv: -kv[1])[:8]),
                "vmstat_delta": {k: v1[k] - v0.get(k, 0) for k in v1 if v1[k] != v0.get(k, 0)},
                "softirqs_delta": {k: [b - a for a, b in zip(s0[k], s1[k])] for k in s1 if k in s0},
                "perf_data": str(d / f"{tag}.data") if record else None}
    return finish


def samples(data, server_pids):
    """cpu-clock samples (4 kHz: 0.25 ms each) of one perf.data split into the bench's servers
    (by process id: other users' `sluice` runs share the name), wrk, and everyone else."""
    import collections
    import re
    out = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,comm,ip,sym", "-G"],
                         capture_output=True, text=True, timeout=600).stdout
    split = {"servers": collections.Counter(), "wrk": collections.Counter(), "others": collections.Counter()}
    for line in out.splitlines():
        m = re.match(r"\s*(.*?)\s+(\d+)/\d+\s+([0-9a-f]+)\s*(.*)$", line)
        if not m:
            continue
        comm, pid, sym = m.group(1), m.group(2), m.group(4).strip() or "[unknown]"
        who = "servers" if pid in server_pids else "wrk" if comm == "wrk" else "others"
        split[who][sym if who != "others" else comm] += 1
    return split


def main():
    """idle_perf.py RESULT.json [N]: CPU per request of the servers and wrk in both wrk runs,
    and the N symbols whose cost per request grew most while the idle connections were held."""
    import json
    import sys
    r = json.loads(Path(sys.argv[1]).read_text())
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    pids = set(r["per_server"]["per_process"])
    runs = {"no_idle": "wrk_no_idle", "idle_held": "wrk_with_idle"}
    got = {t: samples(r[f"perf_{t}"]["perf_data"], pids) for t in runs}
    # requests in the profiled window: the rate times its length (perf stat's task-clock / CPUs)
    req = {t: r[w]["rps"] * float(r[f"perf_{t}"]["perf_stat"]["task-clock"]) / 1000 / len(r[f"perf_{t}"]["cpu_share"])
           for t, w in runs.items()}
    print(f"wrk req/s {r['wrk_no_idle']['rps']:.0f} / {r['wrk_with_idle']['rps']:.0f}"
          f" ({r['wrk_with_idle']['rps'] / r['wrk_no_idle']['rps']:.2f})")
    for t in runs:
        print(f"{t}: samples {sum(sum(c.values()) for c in got[t].values())}, others {got[t]['others'].most_common(5)}")
    for who in ("servers", "wrk"):
        a, b = got["no_idle"][who], got["idle_held"][who]
        ua, ub = (sum(c.values()) * 250 / req[t] for t, c in (("no_idle", a), ("idle_held", b)))
        print(f"{who}: samples {sum(a.values())} / {sum(b.values())}, us per request {ua:.2f} / {ub:.2f} ({ub / ua:.2f})")
        rows = sorted(((b[s] * 250e3 / req["idle_held"] - a[s] * 250e3 / req["no_idle"], s) for s in set(a) | set(b)),
                      reverse=True)
        for d, s in rows[:top]:
            print(f"   {d:+7.0f} ns/req  ({a[s] * 250e3 / req['no_idle']:.0f} -> {b[s] * 250e3 / req['idle_held']:.0f})  {s}")


if __name__ == "__main__":
    main()
