#!/usr/bin/env python3
"""Small files while large ones are read cold (issue 15): 100 keep-alive wrk connections fetch a
1 KB file, alone and while 16 curl clients read one large file whose pages were dropped just
before (posix_fadvise DONTNEED on that file only). The p99 of the 1 KB clients says whether a
cold read ever holds up the thread that serves the cached file. sluice serve (one or two
builds: --sluice-b for an A/B in the same run) beside nginx-light with aio threads (and
without, --noaio), servers interleaved, the order reversed every other round.

Same testbed as run.py: two namespaces joined by a veth pair, server on CPU 0 (--threads 1 /
worker_processes 1), clients on CPU 1. Caveat (session 12): wrk shares CPU 1 with the 16 curls,
which keep it busy; the first runs showed every server's 1 KB p99 at 54-96 ms with the large
transfers, cold or warm, while the server's CPU was 30-50% busy: that p99 is the client CPU's.
--probe-rt gives wrk real-time priority so that its latencies are the server's. Bounded: wrk -d, curl --max-time, a fixed number of
rounds. The large file is generated at run time under --data (deleted with --clean).
  /work/brief/bin/bench-lock python3 bench/serve/cold_mix.py --rounds 1 --out /tmp/cold.json"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import run
from large import drop_file, resident_share


def make_big(path, size):
    if path.exists() and path.stat().st_size == size:
        return
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(block)


def large_clients(url, pids, clients, size, out):
    """16 curls of the large file, in a thread: what run.run_large measures, for a file of any size."""
    before = run.cpu_seconds(pids)
    t0 = time.monotonic()
    procs = [subprocess.Popen(run.in_ns(run.CLI_NS, run.CLI_CPU, "curl", "-s", "-o", "/dev/null", "--max-time", "300",
                                        "-w", "%{size_download}", url), stdout=subprocess.PIPE, text=True, env=run.ENV)
             for _ in range(clients)]
    sizes = [int(p.communicate(timeout=400)[0] or 0) for p in procs]
    out.update(t0=t0, t1=time.monotonic(), sizes_ok=all(s == size for s in sizes), bytes=sum(sizes),
               server_cpu_s=run.cpu_seconds(pids) - before)


def wrk(a, url):
    if not a.probe_rt:
        return run.run_wrk(url, a.small_conns, a.seconds)
    cmd = run.in_ns(run.CLI_NS, run.CLI_CPU, "chrt", "-f", "10", "wrk", "-t1", f"-c{a.small_conns}", f"-d{a.seconds}s",
                    "--latency", "--timeout", "10s", url)
    return run.parse_wrk(subprocess.run(cmd, capture_output=True, text=True, timeout=a.seconds + 60, env=run.ENV).stdout)


def mixed_run(a, name, base, pids, big, cache):
    """wrk of the 1 KB file alone, then again while the large transfers run."""
    alone = wrk(a, f"{base}/1k.bin")
    if cache == "cold":
        drop_file(big)
    else:
        with open(big, "rb") as f:
            while f.read(8 << 20):
                pass
    resident = resident_share(big)
    large = {}
    t = threading.Thread(target=large_clients, args=(f"{base}/big.bin", pids, a.clients, a.size_mib << 20, large))
    t.start()
    time.sleep(0.5)  # the large transfers under way before the small ones start
    w0 = time.monotonic()
    mixed = wrk(a, f"{base}/1k.bin")
    w1 = time.monotonic()
    t.join(timeout=600)
    wall = large["t1"] - large["t0"]
    return {"server": name, "cache": cache, "resident_before": resident, "alone": alone, "with_large": mixed,
            "p99_ratio": mixed["p99_ms"] / alone["p99_ms"] if alone["p99_ms"] else None,
            # the share of wrk's window during which the large transfers ran
            "overlap": max(0.0, min(w1, large["t1"]) - w0) / (w1 - w0),
            "large_complete": large["sizes_ok"], "large_mb_s": large["bytes"] / wall / 1e6,
            "large_seconds": wall, "server_cpu_s": large["server_cpu_s"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(run.HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--sluice-b", default=None, help="a second sluice build, measured in the same run")
    ap.add_argument("--sluice-c", default=None, help="a third one")
    ap.add_argument("--warm", action="store_true", help="also with the large file in the page cache")
    ap.add_argument("--probe-rt", action="store_true",
                    help="wrk at SCHED_FIFO priority 10 (chrt) so that the 16 curls on the same client CPU "
                         "cannot delay it: its latencies are then the server's (not yet run, session 12)")
    ap.add_argument("--data", default="/work/data/h15f/cold-mix")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--small-conns", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=4, help="wrk -d for each 1 KB run")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--noaio", action="store_true", help="also nginx without aio threads")
    ap.add_argument("--clean", action="store_true", help="delete --data at the end")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    for tool in ("nginx", "curl", "wrk", "taskset", "fincore"):
        if not shutil.which(tool):
            sys.exit(f"cold_mix.py: {tool} is missing")
    root = Path(a.data) / "www"
    root.mkdir(parents=True, exist_ok=True)
    (root / "1k.bin").write_bytes(os.urandom(1024))
    big = root / "big.bin"
    make_big(big, a.size_mib << 20)
    run.sh(run.NETNS, "up")
    results = {"command": " ".join(sys.argv), "kernel": os.uname().release, "size": a.size_mib << 20, "rows": []}
    procs, servers = {}, {}
    try:
        builds = [("sluice", a.sluice)] + [(n, b) for n, b in (("sluice-b", a.sluice_b), ("sluice-c", a.sluice_c)) if b]
        for i, (name, binary) in enumerate(builds):
            p, pids = run.start_sluice(binary, root, 8080 + i)
            procs[name] = p
            servers[name] = (f"http://{run.SRV_IP}:{8080 + i}", pids)
        for name, port in (("nginx", 8090), ("nginx-noaio", 8091))[: 2 if a.noaio else 1]:
            p, pids = run.start_nginx(root, port, Path(a.data) / name, aio=name == "nginx")
            procs[name] = p
            servers[name] = (f"http://{run.SRV_IP}:{port}", pids)
        for rnd in range(a.rounds):
            order = list(servers.items())
            if rnd % 2:
                order.reverse()
            for cache in ("cold", "warm") if a.warm else ("cold",):
                for name, (base, pids) in order:
                    row = mixed_run(a, name, base, pids, big, cache)
                    row["round"] = rnd
                    print(json.dumps(row), flush=True)
                    results["rows"].append(row)
    finally:
        run.stop_servers(procs, results)
        run.sh(run.NETNS, "down")
        if a.clean:
            shutil.rmtree(a.data, ignore_errors=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
