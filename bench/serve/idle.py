#!/usr/bin/env python3
"""Idle keep-alive connections held by `sluice serve` (issue 15, "Idle connections").

In a network namespace of its own (loopback only: every 127.x.y.z address is local, so the
client binds many source addresses, ~28k ports each, with no other set-up), --server-procs K
`sluice serve --threads T` processes on one port (each binds its own SO_REUSEPORT listener;
all pinned to CPU 0, each in a session of its own) and:
  1. wrk -c ACTIVE on a 1 KB file for --seconds (pinned to CPU 1): requests/s and p99 with no
     idle connections, against these same K processes;
  2. client processes (idle_client.py hold, each at most --per-client connections) that open
     --count keep-alive connections in all, each sending one GET and reading its answer, then
     holding it idle;
  3. each server process's own /_stats (idle_client.py probe): connections_open per process;
  4. the same wrk run while the idle connections are held;
  5. with --wrk-after, the same wrk run again once the idle clients are killed.
With --peer-nginx, nginx runs beside them (idle_nginx.py: K workers, same CPU, its own port)
and every wrk step runs against both, alternated --rounds times; --idle-to says which of the
two holds the idle connections, so the loss is measured for the holder and for the other.
With --perf-dir, each wrk run is profiled (idle_perf.py: perf record/stat, /proc/vmstat and
per-CPU deltas, the servers' and wrk's CPU); `python3 idle_perf.py RESULT.json` splits it.
Why K processes: every process here has RLIMIT_NOFILE 20,000 (hard) and the container lacks
CAP_SYS_RESOURCE, so one process holds at most ~19,800 connections (fds); --count is capped to
what K processes may hold, and the result says so (rlimit_nofile, cap_sys_resource, count_capped_*).
Recorded: connections held (per process, from /_stats and from /proc/PID/fd), the servers'
memory summed over the K processes (Pss, Private, RSS from smaps_rollup) against the same K
started with one connection slot each, /proc/meminfo Slab / SUnreclaim / MemAvailable and
/proc/net/sockstat before and while held, and why the clients stopped (count reached, free
memory at --min-free-gib, a connect error, the time bound). Before it starts, a step whose
connections would take MemAvailable under --min-free-gib (at --kernel-bytes-per-conn) is capped
(count_capped_by_memory). Bounded: --connect-seconds for opening, wrk -d, and everything is torn
down at the end (clients killed, servers stopped, sysctls put back, the namespace deleted):
  /work/brief/bin/bench-lock timeout 470 python3 bench/serve/idle.py --sluice build/tools/sluice \
      --count 1000000 --server-procs 56 --out /tmp/idle.json
Needs root (namespace, fs.nr_open / fs.file-max)."""
import argparse
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from idle_client import PER_SOURCE, PORT  # noqa: E402
from idle_nginx import NGINX_PORT, held_by_workers, start_nginx, stop_nginx  # noqa: E402
from idle_proc import loadavg, meminfo, rollup_sum  # noqa: E402
from idle_wrk import NS, boost, in_ns, run_wrk, wrk_step  # noqa: E402

HERE = Path(__file__).resolve().parent
MEM_KEYS = ("MemAvailable", "MemFree", "Slab", "SUnreclaim", "SReclaimable")


def raise_nofile(want):
    """RLIMIT_NOFILE of this process up to `want` (the hard limit too when CAP_SYS_RESOURCE
    allows); returns what it got."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, soft), max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def can_raise_hard_limit():
    """CAP_SYS_RESOURCE (bit 24) in the effective set: without it no process here may hold
    more fds than the hard RLIMIT_NOFILE it was given."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 24 & 1)
    return False


def sysctl_set(name, value):
    path = Path("/proc/sys") / name.replace(".", "/")
    old = path.read_text().strip()
    if int(old) < value:
        path.write_text(str(value))
    return old


def sysctl_restore(name, old):
    (Path("/proc/sys") / name.replace(".", "/")).write_text(old)


def start_servers(sluice, root, k, threads, max_conns, logs, boosted=False):
    """K servers on one port; their output goes to files (a pipe nobody reads would stall one)."""
    procs = []
    try:
        for i in range(k):
            cmd = in_ns("0", sluice, "serve", root, "--http", PORT, "--bind", "127.0.0.1", "--threads", threads,
                        "--public", "--max-connections", max_conns, "--idle-timeout", "3600")
            out = logs / f"serve-{max_conns}-{i}.out"
            with open(out, "w") as o, open(logs / f"serve-{max_conns}-{i}.err", "w") as e:
                procs.append(subprocess.Popen(cmd, stdout=o, stderr=e))
            procs[-1].out = out
        end = time.monotonic() + 60
        for p in procs:  # each prints its URL once listening
            while not p.out.read_text().startswith("http://"):
                if time.monotonic() > end or p.poll() is not None:
                    raise SystemExit(f"serve did not start: {p.out.read_text()[:200]!r} "
                                     f"{p.out.with_suffix('.err').read_text()[:400]!r}")
                time.sleep(0.05)
            if boosted and not boost(p.pid):
                raise SystemExit(f"serve {p.pid}: its autogroup could not be set (--boost)")
    except BaseException:
        stop_all(procs)
        raise
    return procs


def killpg(p, sig):
    try:
        os.killpg(p.pid, sig)  # setsid made each process the leader of its own group
    except ProcessLookupError:
        pass


def stop_all(procs, timeout=90):
    for p in procs:
        if p.poll() is None:
            killpg(p, signal.SIGTERM)
    end = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            killpg(p, signal.SIGKILL)
            p.wait()


def kernel_state():
    m = meminfo()
    ss = subprocess.run(["ip", "netns", "exec", NS, "cat", "/proc/net/sockstat"], capture_output=True, text=True).stdout
    return {k: m[k] for k in MEM_KEYS}, ss


def open_idle(a, deadline):
    """Starts the client processes and waits (bounded) for each one's `done` line."""
    per = -(-a.count // a.procs)
    sources_per = -(-per // PER_SOURCE)
    children = []
    for i in range(a.procs):
        n = min(per, a.count - i * per)
        if n <= 0:
            break
        # time.monotonic is system-wide: the children compare against the same clock.
        cmd = in_ns(a.client_cpus, sys.executable, HERE / "idle_client.py", "hold", i * sources_per, n,
                    int(a.min_free_gib * 2**30), deadline, NGINX_PORT if a.idle_to == "nginx" else PORT)
        children.append(subprocess.Popen(cmd, stdout=subprocess.PIPE))
    done = {}
    pending = {}  # the raw fd is read (a buffered readline could hide a line select cannot see)
    sel = selectors.DefaultSelector()
    for c in children:
        sel.register(c.stdout.fileno(), selectors.EVENT_READ, c)
        pending[c.pid] = b""
    end = deadline + 90  # a child checks the deadline every 100 connections (30 s per connect at most)
    while len(done) < len(children) and time.monotonic() < end:
        for key, _ in sel.select(timeout=1):
            c = key.data
            chunk = os.read(key.fd, 4096)
            pending[c.pid] += chunk
            for line in pending[c.pid].decode().splitlines():
                if line.startswith("done "):
                    _, n, why = line.strip().split(" ", 2)
                    done[c.pid] = (int(n), why)
            if c.pid in done or not chunk:
                done.setdefault(c.pid, (0, "client exited early"))
                sel.unregister(key.fd)
    sel.close()
    for c in children:
        done.setdefault(c.pid, (0, "no answer by the time bound"))
    return children, done


def per_server(pids, per_pid=12):
    cmd = ["ip", "netns", "exec", NS, sys.executable, HERE / "idle_client.py", "probe", str(per_pid),
           ",".join(map(str, pids))]
    out = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=300)
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {"error": (out.stdout + out.stderr)[-400:]}


def plan(a, result, nofile):
    """Caps --count by the fd limit (per process) and by MemAvailable; sets a.procs."""
    slots = nofile - 300  # fds a server needs besides its connections: listener, ring, files, stdio
    result["max_connections_per_server"] = slots
    fit = slots - a.active - 100
    if a.server_procs > 1:
        # SO_REUSEPORT spreads connections by a hash, not evenly: leave each process ~7% for it
        fit = int(a.server_procs * (slots - a.active) * 0.93)
    if a.count > fit:
        a.count = fit
        result["count_capped_by_rlimit_nofile"] = fit
    avail = meminfo()["MemAvailable"]
    result["mem_available_at_plan"] = avail
    room = int((avail - a.min_free_gib * 2**30) / a.kernel_bytes_per_conn)
    if a.count > room:
        a.count = max(0, room)
        result["count_capped_by_memory"] = a.count
    a.procs = max(a.procs, -(-a.count // a.per_client))


def measure(a, sluice, root, logs, result):
    k = a.server_procs
    small = start_servers(sluice, root, k, a.threads, a.threads, logs)
    try:
        time.sleep(1)
        result["server_mem_min_slots"], _ = rollup_sum([p.pid for p in small])
    finally:
        stop_all(small)
    servers = start_servers(sluice, root, k, a.threads, result["max_connections_per_server"], logs, a.boost)
    children, nginx, ngx = [], None, []
    try:
        pids = [p.pid for p in servers]
        if a.peer_nginx:
            slots = result["max_connections_per_server"]
            nginx, ngx = start_nginx(in_ns, root, k, slots, slots + 200, logs / "nginx")
            if a.boost and not boost(nginx.pid):  # its workers are in its session: one autogroup
                raise SystemExit("nginx: its autogroup could not be set (--boost)")
            result["nginx_workers"] = len(ngx)
        time.sleep(1)
        result["autogroups"] = [Path(f"/proc/{q}/autogroup").read_text().strip() for q in pids[:1] + ngx[:1]]
        result["server_mem_start"], _ = rollup_sum(pids)
        run_wrk(a.active, 2)  # warm the page cache and each server's buffer pools
        if ngx:
            run_wrk(a.active, 2, port=NGINX_PORT)
            result["nginx_mem_start"], _ = rollup_sum(ngx)
        groups = {"servers": pids, "nginx": ngx}
        wrk_step(a, result, "wrk_no_idle", groups)
        result["server_mem_after_wrk"], _ = rollup_sum(pids)
        result["meminfo_before"], result["sockstat_before"] = kernel_state()
        result["loadavg_before"] = loadavg()
        t0 = time.monotonic()
        children, done = open_idle(a, t0 + a.connect_seconds)
        result["client_procs"] = len(children)
        groups["holders"] = [c.pid for c in children]
        result["connect_seconds"] = time.monotonic() - t0
        held = sum(n for n, _ in done.values())
        result["held"] = held
        result["stopped_because"] = sorted({w for _, w in done.values()})
        time.sleep(2)
        result["meminfo_held"], result["sockstat_held"] = kernel_state()
        result["loadavg_held"] = loadavg()
        result["server_mem_held"], each = rollup_sum(pids)
        result["client_mem_held"], _ = rollup_sum([c.pid for c in children if c.poll() is None])
        if a.idle_to == "sluice":
            result["per_server"] = per_server(pids)
            for pid, e in result["per_server"].get("per_process", {}).items():
                e["pss"], e["rss"] = each[int(pid)]["Pss"], each[int(pid)]["Rss"]
            result["idle_held_by_stats"] = sum(e.get("idle_held", 0) for e in result["per_server"].get("per_process", {}).values())
        else:  # nginx has no /_stats: its workers' sockets from /proc (each also holds a listener)
            result["nginx_mem_held"], _ = rollup_sum(ngx)
            result["nginx_held_by_proc"] = held_by_workers(ngx)
        wrk_step(a, result, "wrk_with_idle", groups)
        result["server_mem_after_wrk_idle"], _ = rollup_sum(pids)
    finally:
        t_end = time.monotonic()
        for c in children:  # SIGKILL: their sockets reset (SO_LINGER 0), no TIME_WAIT
            killpg(c, signal.SIGKILL)
        for c in children:
            c.wait()
        if a.wrk_after and "wrk_with_idle" in result:
            # the same wrk once the idle connections are gone: a baseline taken after, so that
            # drift in the shared machine's load over the run is not read as their cost
            time.sleep(5)
            result["sockstat_after_idle"] = kernel_state()[1]
            wrk_step(a, result, "wrk_after_idle", groups)
        if nginx:
            stop_nginx(nginx)
        stop_all(servers)
        result["teardown_seconds"] = time.monotonic() - t_end
        errs = [e.read_text()[-300:] for e in sorted(logs.glob("serve-*.err")) if e.stat().st_size]
        result["server_stderr"] = {"processes": len(errs), "first": errs[:3]}


def derive(result):
    held = result.get("held", 0)
    if not held:
        return
    m0, m1 = result["meminfo_before"], result["meminfo_held"]
    lo, hi = result["server_mem_min_slots"], result["server_mem_held"]
    for key in ("Pss", "Private", "Rss"):
        result[f"server_{key.lower()}_per_conn_vs_min_slots"] = (hi[key] - lo[key]) / held
        result[f"server_{key.lower()}_per_conn_grown"] = (hi[key] - result["server_mem_after_wrk"][key]) / held
    result["kernel_slab_per_conn"] = (m1["Slab"] - m0["Slab"]) / held
    result["kernel_sunreclaim_per_conn"] = (m1["SUnreclaim"] - m0["SUnreclaim"]) / held
    result["mem_available_used_per_conn"] = (m0["MemAvailable"] - m1["MemAvailable"]) / held
    result["client_pss_per_conn"] = result["client_mem_held"]["Pss"] / held
    for who in ("", "nginx_"):
        if f"{who}wrk_with_idle" not in result:
            continue
        b, w = result[f"{who}wrk_no_idle"], result[f"{who}wrk_with_idle"]
        result[f"{who}rps_ratio"] = w["rps"] / b["rps"]
        result[f"{who}p99_ratio"] = w["p99_ms"] / b["p99_ms"] if b["p99_ms"] else None
        if f"{who}wrk_after_idle" in result:
            result[f"{who}rps_ratio_after"] = w["rps"] / result[f"{who}wrk_after_idle"]["rps"]
    if "nginx_mem_held" in result:
        result["nginx_pss_per_conn_grown"] = (result["nginx_mem_held"]["Pss"] - result["nginx_mem_start"]["Pss"]) / held
    # the old keys (one process: RSS), kept for the h15d runs' readers
    result["server_rss_min_slots"] = lo["Rss"]
    result["server_rss_held"] = hi["Rss"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default="build/tools/sluice")
    ap.add_argument("--count", type=int, default=1_000_000)  # capped by the fd limit and MemAvailable
    ap.add_argument("--server-procs", type=int, default=1)
    ap.add_argument("--procs", type=int, default=4, help="client processes at least (more if --per-client asks)")
    ap.add_argument("--per-client", type=int, default=18000, help="connections per client process at most (fds)")
    ap.add_argument("--threads", type=int, default=1)
    # On loopback a connect's handshake runs mostly on the connecting CPU: opening a million on
    # CPU 1 alone takes longer than a bench-lock turn. Once open the clients are silent.
    ap.add_argument("--client-cpus", default="1", help="CPUs of the idle clients (wrk stays on CPU 1)")
    ap.add_argument("--active", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connect-seconds", type=int, default=240)
    ap.add_argument("--min-free-gib", type=float, default=4.5)
    ap.add_argument("--kernel-bytes-per-conn", type=int, default=11_000, help="both ends (h15d: 10.5 KB)")
    ap.add_argument("--ehash-entries", type=int, default=0,
                    help="the bench namespace's own TCP established hash (tcp_child_ehash_entries, a power of"
                         " two; 0: it shares the host's, tcp_ehash_entries, 262,144 here)")
    ap.add_argument("--perf-dir", help="during both wrk runs: perf record -a -g, perf stat, /proc/vmstat and"
                    " per-CPU deltas (idle_perf.py); perf data written here")
    ap.add_argument("--boost", action="store_true", help="the servers', nginx's and wrk's autogroups at nice -20"
                    " (idle_wrk.boost): on a machine others share, as if it were quiet; the idle clients stay at 0")
    ap.add_argument("--counters", action="store_true", help="with --perf-dir: no perf record; perf stat counts"
                    " tracepoints too (idle_perf.TRACE_EVENTS)")
    ap.add_argument("--wrk-after", action="store_true", help="wrk a third time after the idle clients are killed")
    ap.add_argument("--peer-nginx", action="store_true", help="nginx beside sluice (idle_nginx.py); each wrk step"
                    " runs against both")
    ap.add_argument("--idle-to", choices=("sluice", "nginx"), default="sluice",
                    help="the server the idle connections are held on (nginx needs --peer-nginx)")
    ap.add_argument("--rounds", type=int, default=1, help="with --peer-nginx: wrk runs per server in each step,"
                    " the servers alternated")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.idle_to == "nginx" and not a.peer_nginx:
        ap.error("--idle-to nginx needs --peer-nginx")
    if a.counters and not a.perf_dir:
        ap.error("--counters needs --perf-dir")
    # timeout(1) and bench-lock stop with SIGTERM: tear down (finally) rather than die in place
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("idle.py: stopped by SIGTERM"))
    sluice = str(Path(a.sluice).resolve())
    result = {"count_asked": a.count, "server_procs": a.server_procs, "threads": a.threads, "active": a.active,
              "peer_nginx": a.peer_nginx, "idle_to": a.idle_to, "rounds": a.rounds, "boost": a.boost,
              "seconds": a.seconds, "min_free_gib": a.min_free_gib, "client_cpus": a.client_cpus,
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "loadavg_start": loadavg()}
    # Every process here inherits this one's RLIMIT_NOFILE; it can rise past the hard limit
    # only with CAP_SYS_RESOURCE. A server needs one fd per connection plus the active ones.
    nofile = raise_nofile(a.count // a.server_procs + a.active + 1000)
    result["rlimit_nofile"] = nofile
    result["cap_sys_resource"] = can_raise_hard_limit()
    plan(a, result, nofile)
    result["count"], result["client_procs_planned"] = a.count, a.procs
    olds = {}
    tmp = tempfile.TemporaryDirectory(prefix="h15d-idle-")
    root = Path(tmp.name)
    logdir = tempfile.TemporaryDirectory(prefix="h15d-idle-logs-")
    (root / "1k.bin").write_bytes(os.urandom(1024))
    (root / "idle.txt").write_bytes(b"idle\n")
    # A namespace takes its own established-socket hash when it is made, sized by the host's
    # tcp_child_ehash_entries then (0: it shares the host's). Two million sockets in 262,144
    # buckets put ~8 on each chain every active packet walks.
    if a.ehash_entries:
        olds["net.ipv4.tcp_child_ehash_entries"] = sysctl_set("net.ipv4.tcp_child_ehash_entries", a.ehash_entries)
    result["ehash_entries"] = a.ehash_entries or int(Path("/proc/sys/net/ipv4/tcp_ehash_entries").read_text())
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up"], check=True)
        for name, v in (("fs.nr_open", nofile + 1000), ("fs.file-max", 3 * a.count + 200000)):
            olds[name] = sysctl_set(name, v)
        for name, v in (("net.core.somaxconn", 65535), ("net.ipv4.tcp_max_syn_backlog", 65535)):
            subprocess.run(["ip", "netns", "exec", NS, "sysctl", "-q", "-w", f"{name}={v}"], check=True)
        if a.count > 0:
            measure(a, sluice, str(root), Path(logdir.name), result)
    finally:
        t = time.monotonic()
        subprocess.run(["ip", "netns", "del", NS], timeout=300)
        result["netns_del_seconds"] = time.monotonic() - t
        for name, old in olds.items():
            sysctl_restore(name, old)
        tmp.cleanup()
        logdir.cleanup()
    derive(result)
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
