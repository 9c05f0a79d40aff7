#!/usr/bin/env python3
"""sluice serve beside nginx-light (issue 15, first engine), same files, same run.

Server and load generator in two network namespaces joined by a veth pair
(bench/testbed/netns.sh, our own namespace names), the server pinned to CPU 0 and the
clients to CPU 1 (this VM has 2), so the server has exactly one CPU: sluice --threads 1,
nginx worker_processes 1. All three servers listen at once and every cell runs them back to back (interleaved), on
the same files:
  - wrk keep-alive (-t1, -d 10s, --latency), 1 KB and 10 KB files at 10 / 100 / 1000
    connections: requests/s, p50, p99;
  - 16 concurrent curl clients of one 1 GiB file (page cache warm): aggregate MB/s and the
    server's CPU seconds per GB (utime + stime of its processes, from /proc).
Run it under the bench lock:
  flock /run/sluice-bench.lock python3 bench/serve/run.py --sluice build/tools/sluice --out /tmp/serve.json
Every run is bounded (wrk -d, curl --max-time). Data goes to /work/data/h15/serve-bench
(deleted at the end unless --keep)."""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NETNS = HERE.parent / "testbed" / "netns.sh"
ENV = dict(os.environ, SB_NS_SND="h15-serve-cli", SB_NS_RCV="h15-serve-srv", SB_IP_SND="10.213.15.1",
           SB_IP_RCV="10.213.15.2")
ENV.update({k: v for k, v in os.environ.items() if k in ("SB_NS_SND", "SB_NS_RCV", "SB_IP_SND", "SB_IP_RCV")})
SRV_NS, CLI_NS, SRV_IP = ENV["SB_NS_RCV"], ENV["SB_NS_SND"], ENV["SB_IP_RCV"]
SRV_CPU, CLI_CPU = "0", "1"

NGINX_CONF = """
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx.err warn;
worker_rlimit_nofile 20000;
events {{ worker_connections 19000; use epoll; }}
thread_pool default threads=2 max_queue=65536;
http {{
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  {aio}
  open_file_cache max=1000 inactive=60s;
  open_file_cache_valid 60s;
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 65;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  server {{
    listen {ip}:{port} reuseport backlog=4096;
    root {root};
    location / {{ }}
  }}
}}
"""


def sh(*cmd, **kw):
    return subprocess.run(list(map(str, cmd)), check=True, env=ENV, **kw)


def in_ns(ns, cpu, *cmd):
    # Every server and every client tool in a session of its own (h15k, h15n): with the
    # kernel's autogroups on (this machine's default), a session is one scheduling group, and
    # the bench's one session made a side's share of its CPU against other load follow how
    # many threads it had (get.py measured 0.70x -> 0.98x from this alone). setsid execs in
    # place (a Popen child leads no process group), so p.pid stays the server's pid.
    return ["ip", "netns", "exec", ns, "taskset", "-c", cpu, "setsid", *map(str, cmd)]


def cpu_seconds(pids):
    """utime + stime of each process: /proc/PID/stat counts every thread, live and exited (a
    sum over /proc/PID/task missed the threads that had ended, as floor_send's do)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(f[11]) + int(f[12])) / tick
    return total


def make_data(root, large=True):
    root.mkdir(parents=True, exist_ok=True)
    for name, size in (("1k.bin", 1024), ("10k.bin", 10240)):
        (root / name).write_bytes(os.urandom(size))
    if not large:
        return
    big = root / "1g.bin"
    if not big.exists() or big.stat().st_size != 1 << 30:
        with open(big, "wb") as f:
            block = os.urandom(1 << 20)
            for _ in range(1024):
                f.write(block)
    with open(big, "rb") as f:  # warm: the large-file runs measure the cached path
        while f.read(8 << 20):
            pass


def parse_wrk(out):
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])

    def ms(label):
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\b", out, re.M)
        v = float(m[1])
        return v / 1000 if m[2] == "us" else v * 1000 if m[2] == "s" else v

    errors = re.search(r"Socket errors: (.*)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "p50_ms": ms("50"), "p99_ms": ms("99"), "errors": errors[1] if errors else "",
            "non2xx": int(non2xx[1]) if non2xx else 0}


def run_wrk(url, conns, seconds, close=False):
    threads = 1
    extra = ["-H", "Connection: close"] if close else []
    cmd = in_ns(CLI_NS, CLI_CPU, "wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "10s",
                *extra, url)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, env=ENV).stdout
    return parse_wrk(out)


def run_large(url, pids, clients=16):
    before = cpu_seconds(pids)
    t0 = time.monotonic()
    procs = [subprocess.Popen(in_ns(CLI_NS, CLI_CPU, "curl", "-s", "-o", "/dev/null", "--max-time", "300", "-w", "%{size_download}",
                                    url), stdout=subprocess.PIPE, text=True, env=ENV) for _ in range(clients)]
    sizes = [int(p.communicate(timeout=400)[0] or 0) for p in procs]
    wall = time.monotonic() - t0
    cpu = cpu_seconds(pids) - before
    total = sum(sizes)
    ok = all(s == 1 << 30 for s in sizes)
    return {"clients": clients, "bytes": total, "complete": ok, "seconds": wall, "mb_s": total / wall / 1e6,
            "server_cpu_s": cpu, "cpu_s_per_gb": cpu / (total / 1e9) if total else None}


def wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run(in_ns(CLI_NS, CLI_CPU, "curl", "-s", "-o", "/dev/null", "--max-time", "2",
                                 f"http://{SRV_IP}:{port}/1k.bin"), env=ENV)
        if r.returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"server on port {port} did not answer")


def start_sluice(binary, root, port, extra=()):
    p = subprocess.Popen(in_ns(SRV_NS, SRV_CPU, binary, "serve", root, "--http", port, "--bind", SRV_IP, "--threads", "1",
                               "--public", "--json", "-v", *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    p.stdout.readline()
    wait_port(port)
    return p, [p.pid]


def start_nginx(root, port, workdir, aio=True, location=""):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "body").mkdir(exist_ok=True)
    (workdir / "body").chmod(0o777)  # the worker (nobody) keeps request bodies there
    conf = workdir / "nginx.conf"
    text = NGINX_CONF.format(dir=workdir, ip=SRV_IP, port=port, root=root, aio="aio threads;" if aio else "")
    conf.write_text(text.replace("location / { }", "location / { " + location + " }"))
    p = subprocess.Popen(in_ns(SRV_NS, SRV_CPU, "nginx", "-c", conf, "-p", workdir), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=ENV)
    wait_port(port)
    kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    # the master forks the worker; ip netns exec and taskset exec in place, so p.pid is the master
    return p, [p.pid] + [int(k) for k in kids]


def stop_servers(procs, results):
    """SIGTERM sluice (it drains and prints its --json stats) and the floors, SIGQUIT nginx (graceful)."""
    for name, p in procs.items():
        p.send_signal(signal.SIGQUIT if name.startswith("nginx") else signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        if name.startswith("sluice") and out.strip():
            results[f"{name}_stats"] = json.loads(out.strip().splitlines()[-1])
            results[f"{name}_paths"] = [l for l in err.splitlines() if "path" in l or "cold" in l or "ring" in l]


def measure(servers, seconds, conns_list, close=False, large_too=True):
    """Each cell runs every server back to back (interleaved, not one server after the
    other), so that load from outside the bench drifts over all of them alike."""
    rows, large = [], []
    for size in ("1k", "10k"):
        for conns in conns_list:
            for name, (base, pids) in servers.items():
                r = run_wrk(f"{base}/{size}.bin", conns, seconds, close)
                r.update(server=name, file=size, conns=conns, close=close)
                print(json.dumps(r), flush=True)
                rows.append(r)
    for name, (base, pids) in servers.items() if large_too else ():
        x = run_large(f"{base}/1g.bin", pids)
        x["server"] = name
        print(json.dumps(x), flush=True)
        large.append(x)
    return rows, large


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--data", default="/work/data/h15/serve-bench")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--conns", default="10,100,1000")
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--close", action="store_true", help="wrk with Connection: close (a connection per request)")
    ap.add_argument("--no-large", action="store_true", help="skip the 16 x 1 GiB runs")
    ap.add_argument("--no-noaio", action="store_true", help="skip nginx without aio threads")
    a = ap.parse_args()
    for tool in ("wrk", "nginx", "curl", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"run.py: {tool} is missing (bench/peers/setup installs the peers)")
    root = Path(a.data) / "www"
    make_data(root, not a.no_large)
    conns_list = [int(c) for c in a.conns.split(",")]
    sh(NETNS, "up")
    results = {"command": " ".join(sys.argv), "kernel": os.uname().release, "runs": [], "large": []}
    try:
        procs = {}
        try:
            # All three listen at once on their own ports (idle ones cost nothing): nginx as the
            # issue tunes it (aio threads), and without aio threads, since with it nginx 1.22 may
            # hand sendfile to its thread pool, which costs small files dearly.
            servers = {}
            p, pids = start_sluice(a.sluice, root, 8080)
            procs["sluice"] = p
            servers["sluice"] = (f"http://{SRV_IP}:8080", pids)
            for name, port in (("nginx", 8081), ("nginx-noaio", 8082))[: 1 if a.no_noaio else 2]:
                p, pids = start_nginx(root, port, Path(a.data) / name, aio=name == "nginx")
                procs[name] = p
                servers[name] = (f"http://{SRV_IP}:{port}", pids)
            results["runs"], results["large"] = measure(servers, a.seconds, conns_list, a.close, not a.no_large)
        finally:
            stop_servers(procs, results)
    finally:
        sh(NETNS, "down")
        if not a.keep:
            shutil.rmtree(a.data, ignore_errors=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))
    print(json.dumps(results["large"]))
    return results


if __name__ == "__main__":
    main()
