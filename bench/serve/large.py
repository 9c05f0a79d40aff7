#!/usr/bin/env python3
"""Large files: 16 concurrent curl clients of one 1 GiB file, sluice serve beside nginx-light
(sendfile on, as run.py tunes it; with and without aio threads), same run, servers interleaved
round by round. Aggregate MB/s and the server's CPU seconds per GB (utime + stime of all its
threads/processes, from /proc), page cache warm and cold (cold: the file's pages dropped with
posix_fadvise(DONTNEED) before each server's run, so only this file leaves the cache, not
other users' pages). Optionally `perf record` of sluice in one extra warm run (not counted).

Same testbed as run.py: two namespaces joined by a veth pair, server on CPU 0 (one thread /
one worker), clients on CPU 1. Bounded: curl --max-time, a fixed number of rounds.
  /work/brief/bin/bench-lock python3 bench/serve/large.py --rounds 2 --out /tmp/large.json"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import run


def drop_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_share(path):
    """Fraction of the file in the page cache (fincore from util-linux), for the record."""
    out = subprocess.run(["fincore", "-b", "-n", "-o", "RES,SIZE", str(path)], capture_output=True, text=True).stdout.split()
    return int(out[0]) / int(out[1]) if len(out) == 2 and int(out[1]) else None


def run_iperf(streams, seconds, port=5201):
    """iperf3 -P STREAMS over the same veth, CPUs and namespaces, the server sending (-R): the
    link's rate for the issue's "16 clients at least 0.9x iperf3 with 16 streams". Each side
    in a session of its own (run.in_ns). The server's CPU per GB is recorded too, but iperf3
    send()s from a user buffer (a copy per byte), so that is not the same work as sendfile."""
    srv = subprocess.Popen(run.in_ns(run.SRV_NS, run.SRV_CPU, "iperf3", "-s", "-1", "-B", run.SRV_IP, "-p", port),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=run.ENV)
    try:
        deadline = time.monotonic() + 10
        while True:  # the listener is up when a client connects; iperf3 -s -1 serves one test only, so poll with ss
            ss = subprocess.run(["ip", "netns", "exec", run.SRV_NS, "ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                                text=True, env=run.ENV).stdout
            if ss.strip() or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        before = run.cpu_seconds([srv.pid])
        out = subprocess.run(run.in_ns(run.CLI_NS, run.CLI_CPU, "iperf3", "-c", run.SRV_IP, "-p", port, "-P", streams, "-R",
                                       "-t", seconds, "-J"), capture_output=True, text=True, timeout=seconds + 60,
                             env=run.ENV).stdout
        cpu = run.cpu_seconds([srv.pid]) - before
        end = json.loads(out)["end"]
        total = end["sum_received"]["bytes"]
        return {"server": "iperf3", "streams": streams, "bytes": total, "seconds": end["sum_received"]["seconds"],
                "mb_s": end["sum_received"]["bits_per_second"] / 8e6, "server_cpu_s": cpu,
                "cpu_s_per_gb": cpu / (total / 1e9) if total else None, "complete": True}
    finally:
        if srv.poll() is None:  # -1 ends it after the test; a failed client leaves it listening
            srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)


def wait_listen(port, timeout=10):
    """A listener is up (ss); for servers whose every GET is the 1 GiB file (floor_send)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ss = subprocess.run(["ip", "netns", "exec", run.SRV_NS, "ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                            text=True, env=run.ENV).stdout
        if ss.strip():
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def start_floor(binary, mode, big, port):
    p = subprocess.Popen(run.in_ns(run.SRV_NS, run.SRV_CPU, binary, mode, run.SRV_IP, port, big), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=run.ENV)
    wait_listen(port)
    return p, [p.pid]


def cpu0_busy_seconds():
    """CPU 0's non-idle time (the server's CPU: every process and softirq on it), /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{run.SRV_CPU} "):
            f = [int(x) for x in line.split()[1:]]
            return (sum(f[:8]) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(run.HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--data", default="/work/data/h15e/large-bench")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--cold", action="store_true", help="also a cold-cache run per server per round")
    ap.add_argument("--perf", default=None, help="perf record -g sluice in one extra warm run into this file")
    ap.add_argument("--no-noaio", action="store_true")
    ap.add_argument("--sluice-b", default=None, help="a second sluice build beside the first (an A/B of a change)")
    ap.add_argument("--sluice-c", default=None, help="a third one")
    ap.add_argument("--iperf-seconds", type=int, default=8, help="iperf3 -P CLIENTS -R for this long per round (0: none)")
    ap.add_argument("--floor", default=None, help="floor_send binary: its epoll and thread modes beside the servers")
    ap.add_argument("--floor-modes", default="epoll,thread", help="which of floor_send's modes run (comma list)")
    ap.add_argument("--perf-dir", default=None, help="perf record -g -C SERVER_CPU of one extra warm run per server here")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    for tool in ("nginx", "curl", "taskset", "fincore"):
        if not shutil.which(tool):
            sys.exit(f"large.py: {tool} is missing")
    root = Path(a.data) / "www"
    run.make_data(root, True)
    big = root / "1g.bin"
    run.sh(run.NETNS, "up")
    results = {"command": " ".join(sys.argv), "kernel": os.uname().release, "large": []}
    procs = {}
    try:
        servers = {}
        p, pids = run.start_sluice(a.sluice, root, 8080)
        procs["sluice"] = p
        servers["sluice"] = (f"http://{run.SRV_IP}:8080", pids)
        for name, binary, port in (("sluice-b", a.sluice_b, 8083), ("sluice-c", a.sluice_c, 8084)):
            if binary:
                p, pids = run.start_sluice(binary, root, port)
                procs[name] = p
                servers[name] = (f"http://{run.SRV_IP}:{port}", pids)
        for name, port in (("nginx", 8081), ("nginx-noaio", 8082))[: 1 if a.no_noaio else 2]:
            p, pids = run.start_nginx(root, port, Path(a.data) / name, aio=name == "nginx")
            procs[name] = p
            servers[name] = (f"http://{run.SRV_IP}:{port}", pids)
        for mode, port in (("epoll", 8085), ("thread", 8086)) if a.floor else ():
            if mode not in a.floor_modes.split(","):
                continue
            p, pids = start_floor(a.floor, mode, big, port)
            procs[f"floor-{mode}"] = p
            servers[f"floor-{mode}"] = (f"http://{run.SRV_IP}:{port}", pids)
        for rnd in range(a.rounds):
            for cache in ("warm", "cold") if a.cold else ("warm",):
                order = list(servers.items())
                if rnd % 2:
                    order.reverse()  # who goes first alternates between rounds
                for name, (base, pids) in order:
                    if cache == "cold":
                        drop_file(big)
                    else:
                        run.make_data(root, True)  # reads it through once: warm
                    resident = resident_share(big)
                    busy0 = cpu0_busy_seconds()
                    x = run.run_large(f"{base}/1g.bin", pids, a.clients)
                    busy = cpu0_busy_seconds() - busy0
                    x.update(server=name, cache=cache, round=rnd, resident_before=resident, cpu0_busy_s=busy,
                             cpu0_s_per_gb=busy / (x["bytes"] / 1e9) if x["bytes"] else None)
                    print(json.dumps(x), flush=True)
                    results["large"].append(x)
            if a.iperf_seconds:  # the link's rate with as many streams, in the same round
                try:
                    x = run_iperf(a.clients, a.iperf_seconds)
                except (subprocess.SubprocessError, ValueError, KeyError) as e:  # the servers' rows still count
                    x = {"server": "iperf3", "error": repr(e)[-300:], "complete": False, "mb_s": 0.0, "server_cpu_s": 0.0,
                         "cpu_s_per_gb": 0.0}
                x.update(cache="-", round=rnd)
                print(json.dumps(x), flush=True)
                results["large"].append(x)
        if a.perf:
            base, pids = servers["sluice"]
            run.make_data(root, True)
            rec = subprocess.Popen(["perf", "record", "-g", "-o", a.perf, "-p", str(pids[0])], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            x = run.run_large(f"{base}/1g.bin", pids, a.clients)
            rec.send_signal(2)
            rec.wait(timeout=120)
            x.update(server="sluice-under-perf", cache="warm")
            results["perf_run"] = x
        for name, (base, pids) in servers.items() if a.perf_dir else ():
            Path(a.perf_dir).mkdir(parents=True, exist_ok=True)
            run.make_data(root, True)
            rec = subprocess.Popen(["perf", "record", "-g", "-C", run.SRV_CPU, "-o", f"{a.perf_dir}/{name}.data"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # perf is recording before the first byte
            x = run.run_large(f"{base}/1g.bin", pids, a.clients)
            rec.send_signal(2)
            rec.wait(timeout=120)
            x.update(server=name, cache="warm-perf", pids=pids)
            print(json.dumps(x), flush=True)
            results.setdefault("perf_runs", []).append(x)
    finally:
        run.stop_servers(procs, results)
        run.sh(run.NETNS, "down")
        shutil.rmtree(a.data, ignore_errors=True)
    print("| cache | server | round | MB/s | server CPU s | CPU s/GB | CPU 0 busy s/GB | complete |")
    print("|---|---|---|---|---|---|---|---|")
    for x in results["large"]:
        busy = f"{x['cpu0_s_per_gb']:.3f}" if x.get("cpu0_s_per_gb") is not None else "-"
        print(f"| {x['cache']} | {x['server']} | {x['round']} | {x['mb_s']:,.0f} | {x['server_cpu_s']:.2f} | "
              f"{x['cpu_s_per_gb']:.3f} | {busy} | {x['complete']} |")
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
