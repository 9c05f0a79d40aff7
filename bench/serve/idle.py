#!/usr/bin/env python3
"""Idle keep-alive connections held by `sluice serve` (issue 15, "Idle connections").

In a network namespace of its own (loopback only: every 127.x.y.z address is local, so the
client binds many source addresses, ~28k ports each, with no other set-up), one
`sluice serve --threads T` (pinned to CPU 0) and:
  1. wrk -c ACTIVE on a 1 KB file for --seconds (pinned to CPU 1): requests/s and p99 with no
     idle connections;
  2. --procs client processes that open up to --count keep-alive connections in all, each
     sending one request and reading its answer, then holding it idle;
  3. the same wrk run while they are held.
Recorded: connections held, the server's RSS (and its RSS with the default --max-connections,
so the preallocated slots are counted), /proc/meminfo Slab / SUnreclaim / MemAvailable and
/proc/net/sockstat before and after, and why the clients stopped (count reached, the machine's
free memory at --min-free-gib, a connect error, or the time bound).
Bounded: --connect-seconds for opening, wrk -d, and everything is torn down at the end
(clients killed, server stopped, sysctls put back, the namespace deleted). Run it alone:
  /work/brief/bin/bench-lock python3 bench/serve/idle.py --sluice build/tools/sluice --out /tmp/idle.json
Needs root (namespace, fs.nr_open / fs.file-max). Every process holds at most RLIMIT_NOFILE fds:
without CAP_SYS_RESOURCE (this VM's container drops it from the bounding set) the hard limit
cannot rise, so --count is capped to what the server process may hold and the result says so
(rlimit_nofile, cap_sys_resource, count_capped_by_rlimit_nofile)."""
import argparse
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import parse_wrk  # noqa: E402 (the same wrk output as the serve bench)

NS = "h15d-idle"
PORT = 8080
IP_BIND_ADDRESS_NO_PORT = 24
PER_SOURCE = 20000  # connections per source address (the port range holds ~28k)


def meminfo():
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        k, v = line.split(":", 1)
        out[k] = int(v.split()[0]) * 1024
    return out


def sockstat():
    text = Path("/proc/net/sockstat").read_text()  # of the reading process's namespace: read inside NS
    return text


def in_ns(*cmd):
    return ["ip", "netns", "exec", NS, *cmd]


def rss_bytes(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def run_wrk(conns, seconds):
    cmd = in_ns("taskset", "-c", "1", "wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "10s",
                f"http://127.0.0.1:{PORT}/1k.bin")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60).stdout
    return parse_wrk(out)


# ---- the client side: one process, run as `idle.py --child FIRST_SOURCE COUNT MIN_FREE DEADLINE`

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


def child(first_source, count, min_free, deadline):
    got = raise_nofile(count + 100)
    count = min(count, got - 50)
    req = b"GET /idle.txt HTTP/1.1\r\nHost: x\r\n\r\n"
    held = []
    why = "count reached"
    last_report = 0
    for i in range(count):
        if i % 2000 == 0:
            if time.monotonic() > deadline:
                why = "time bound"
                break
            if meminfo()["MemAvailable"] < min_free:
                why = "free memory at the bound"
                break
            if i - last_report >= 10000:
                print(f"held {i}", flush=True)
                last_report = i
        k = first_source + i // PER_SOURCE
        src = f"127.{1 + k // 62500}.{(k // 250) % 250}.{1 + k % 250}"
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            s.settimeout(30)
            s.bind((src, 0))
            s.connect(("127.0.0.1", PORT))
            s.sendall(req)
            got = b""
            while not (got.endswith(b"\r\n\r\nidle\n") or b"HTTP/1.1 4" in got or b"HTTP/1.1 5" in got):
                chunk = s.recv(4096)
                if not chunk:
                    raise ConnectionError("closed by the server")
                got += chunk
            if not got.startswith(b"HTTP/1.1 200"):
                raise ConnectionError(got[:40].decode(errors="replace"))
        except OSError as e:
            why = f"connect/request error after {len(held)}: {e}"
            s.close()
            break
        held.append(s.detach())  # an int per connection: this process's own memory stays small
    print(f"held {len(held)}", flush=True)
    print(f"done {len(held)} {why}", flush=True)
    # Hold until killed (the parent's SIGTERM; bounded by the parent's deadline and its own).
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    end = deadline + 600
    while time.monotonic() < end:
        time.sleep(1)
    os._exit(0)


# ---- the parent

def sysctl_set(name, value):
    path = Path("/proc/sys") / name.replace(".", "/")
    old = path.read_text().strip()
    if int(old) < value:
        path.write_text(str(value))
    return old


def sysctl_restore(name, old):
    (Path("/proc/sys") / name.replace(".", "/")).write_text(old)


def start_server(sluice, root, threads, max_conns):
    cmd = in_ns("taskset", "-c", "0", sluice, "serve", str(root),
                "--http", str(PORT), "--bind", "127.0.0.1", "--threads", str(threads), "--public",
                "--max-connections", str(max_conns), "--idle-timeout", "3600")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("http://"):
        p.kill()
        raise SystemExit(f"serve did not start: {line} {p.stderr.read()}")
    # The pid of sluice itself (ip netns exec and taskset exec it in place).
    return p


def stop(p, timeout=120):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=4)
    ap.add_argument("--sluice", default="build/tools/sluice")
    ap.add_argument("--count", type=int, default=1_000_000)  # capped by RLIMIT_NOFILE when it cannot rise
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--active", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connect-seconds", type=int, default=240)
    ap.add_argument("--min-free-gib", type=float, default=4.5)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        child(int(a.child[0]), int(a.child[1]), int(a.child[2]), float(a.child[3]))
        return
    sluice = str(Path(a.sluice).resolve())
    result = {"count_asked": a.count, "procs": a.procs, "threads": a.threads, "active": a.active,
              "seconds": a.seconds, "min_free_gib": a.min_free_gib, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    # Every process here inherits this one's RLIMIT_NOFILE; it can rise past the hard limit
    # only with CAP_SYS_RESOURCE. The server needs one fd per connection plus the active ones.
    want = a.count + a.active + 1000
    nofile = raise_nofile(want)
    result["rlimit_nofile"] = nofile
    result["cap_sys_resource"] = can_raise_hard_limit()
    if nofile < want:
        a.count = nofile - a.active - 200
        result["count_capped_by_rlimit_nofile"] = a.count
    olds = {}
    children = []
    server = None
    tmp = tempfile.TemporaryDirectory(prefix="h15d-idle-")
    root = Path(tmp.name)
    (root / "1k.bin").write_bytes(os.urandom(1024))
    (root / "idle.txt").write_bytes(b"idle\n")
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        subprocess.run(in_ns("ip", "link", "set", "lo", "up"), check=True)
        for name, v in (("fs.nr_open", nofile + 1000), ("fs.file-max", 3 * a.count + 200000)):
            olds[name] = sysctl_set(name, v)
        for name, v in (("net.core.somaxconn", 65535), ("net.ipv4.tcp_max_syn_backlog", 65535)):
            subprocess.run(in_ns("sysctl", "-q", "-w", f"{name}={v}"), check=True)
        # The server's RSS with one connection slot per thread: what the slots, buffers and
        # pools for the connections add is measured against it.
        small = start_server(sluice, root, a.threads, a.threads)
        time.sleep(1)
        result["server_rss_min_slots"] = rss_bytes(small.pid)
        stop(small)
        server = start_server(sluice, root, a.threads, a.count + a.active + 100)
        time.sleep(1)
        result["server_rss_start"] = rss_bytes(server.pid)
        run_wrk(a.active, 2)  # warm the page cache and the open-file cache
        result["wrk_no_idle"] = run_wrk(a.active, a.seconds)
        result["server_rss_after_wrk"] = rss_bytes(server.pid)
        m0 = meminfo()
        ss0 = subprocess.run(in_ns("cat", "/proc/net/sockstat"), capture_output=True, text=True).stdout
        result["meminfo_before"] = {k: m0[k] for k in ("MemAvailable", "Slab", "SUnreclaim", "SReclaimable")}
        result["sockstat_before"] = ss0
        deadline = time.monotonic() + a.connect_seconds
        per = -(-a.count // a.procs)
        sources_per = -(-per // PER_SOURCE)
        t0 = time.monotonic()
        for i in range(a.procs):
            n = min(per, a.count - i * per)
            if n <= 0:
                break
            cmd = in_ns("taskset", "-c", "1", sys.executable, __file__, "--child", str(i * sources_per), str(n),
                        str(int(a.min_free_gib * 2**30)), str(deadline))
            # time.monotonic is system-wide: the children compare against the same clock.
            children.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
        done = {}
        for c in children:
            for line in c.stdout:
                if line.startswith("done "):
                    _, n, why = line.strip().split(" ", 2)
                    done[c.pid] = (int(n), why)
                    break
        held = sum(n for n, _ in done.values())
        result["connect_seconds"] = time.monotonic() - t0
        result["held"] = held
        result["stopped_because"] = sorted({w for _, w in done.values()})
        time.sleep(2)
        m1 = meminfo()
        result["meminfo_held"] = {k: m1[k] for k in ("MemAvailable", "Slab", "SUnreclaim", "SReclaimable")}
        result["sockstat_held"] = subprocess.run(in_ns("cat", "/proc/net/sockstat"), capture_output=True, text=True).stdout
        result["server_rss_held"] = rss_bytes(server.pid)
        stats = subprocess.run(in_ns("curl", "-s", "--max-time", "30", f"http://127.0.0.1:{PORT}/_stats"),
                               capture_output=True, text=True).stdout
        try:
            st = json.loads(stats)
            result["server_connections_open"] = st.get("connections_open", st.get("connections"))
        except ValueError:
            result["server_stats_error"] = stats[:200]
        result["wrk_with_idle"] = run_wrk(a.active, a.seconds)
        result["server_rss_after_wrk_idle"] = rss_bytes(server.pid)
        if held:
            result["server_rss_per_conn_grown"] = (result["server_rss_held"] - result["server_rss_after_wrk"]) / held
            result["server_rss_per_conn_vs_min_slots"] = (result["server_rss_held"] - result["server_rss_min_slots"]) / held
            # What the kernel would need for --count at this rate, against what is free now
            result["kernel_bytes_for_count_asked"] = (m0["MemAvailable"] - m1["MemAvailable"]) / held * result["count_asked"]
            result["kernel_slab_per_conn"] = (m1["Slab"] - m0["Slab"]) / held
            result["mem_available_used_per_conn"] = (m0["MemAvailable"] - m1["MemAvailable"]) / held
        b, w = result["wrk_no_idle"], result["wrk_with_idle"]
        result["rps_ratio"] = w["rps"] / b["rps"]
        result["p99_ratio"] = w["p99_ms"] / b["p99_ms"] if b["p99_ms"] else None
    finally:
        t_end = time.monotonic()
        if server:
            stop(server)  # closes every connection (its drain), so the server side holds the TIME_WAITs
        for c in children:
            if c.poll() is None:
                c.send_signal(signal.SIGTERM)
        for c in children:
            try:
                c.wait(timeout=120)
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait()
        result["teardown_seconds"] = time.monotonic() - t_end
        subprocess.run(["ip", "netns", "del", NS])
        for name, old in olds.items():
            sysctl_restore(name, old)
        tmp.cleanup()
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
