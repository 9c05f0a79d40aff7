#!/usr/bin/env python3
"""`sluice get` from `sluice serve --port` beside `sluice send` -> `sluice recv` (issue 15's
"sluice get within 10% of send/recv"), same files, same run, alternating.

Server in one network namespace (CPU 0), client in the other (CPU 1), joined by a veth pair
(bench/testbed/netns.sh, names of our own). Both directions move data from the server's
namespace to the client's: get pulls from `serve`; the baseline runs `sluice recv` in the
client namespace and `sluice send` in the server's. The receiving side discards after
verifying (--recv-path null) on both, so the disk is out of the comparison (8 GB of data
at most, none written). Cases:
  - one 2 GiB file;
  - the minor set (bench/datasets/gen.py, --scale 1/16: 6,415 files of 1-400 KiB);
  (with --connect-back, each get also runs the way where the server connects to the client;
  the default get opens every connection from the client);
  - 16 `sluice get` clients of one 1 GiB file at once: aggregate MB/s and the server's CPU
    seconds per GB (utime + stime of its process, from /proc).
With --tree-before BINARY, only the minor set instead: a tree get from a server running BINARY
(an older build: h15r's base sent trees on session threads) beside one running --sluice (trees
on the get ring) and send/recv, interleaved in one call; each server's stats say which path
its gets took (get_sessions_ring_tree, get_sessions_thread).
Run it under the bench lock:
  /work/brief/bin/bench-lock python3 bench/serve/get.py --out /tmp/get.json
Every command has a timeout. Data under --data (deleted at the end unless --keep)."""
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
GEN = HERE.parent / "datasets" / "gen.py"
ENV = dict(os.environ, SB_NS_SND="h15b-get-cli", SB_NS_RCV="h15b-get-srv", SB_IP_SND="10.213.25.1",
           SB_IP_RCV="10.213.25.2", SLUICE_TOKEN="benchtoken")
SRV_NS, CLI_NS, SRV_IP, CLI_IP = ENV["SB_NS_RCV"], ENV["SB_NS_SND"], ENV["SB_IP_RCV"], ENV["SB_IP_SND"]
SRV_CPU, CLI_CPU = "0", "1"
GET_PORT, RECV_PORT = 7000, 7001


def in_ns(ns, cpu, *cmd):
    # Each mover's side in a session of its own (h15k), as a server and its clients are: with
    # autogroups on (this machine's default) the bench's one session made a side's share of
    # its CPU against other load follow its thread count (get_ring.py's placed()).
    return ["ip", "netns", "exec", ns, "taskset", "-c", cpu, "setsid", *map(str, cmd)]


def cpu_seconds(pid):
    """utime + stime of the whole process from /proc/PID/stat, which keeps the time of threads
    that have ended (each get session's stream threads end with it; summing the live tasks,
    as run.py does for the HTTP engine's fixed threads, would miss them)."""
    tick = os.sysconf("SC_CLK_TCK")
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def run_get(binary, path, streams, *extra, port=GET_PORT):
    t0 = time.monotonic()
    r = subprocess.run(in_ns(CLI_NS, CLI_CPU, binary, "get", f"sluice://{SRV_IP}:{port}/{path}", "/tmp", "--recv-path",
                             "null", "--streams", streams, "--json", *extra), capture_output=True, text=True, timeout=400, env=ENV)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError(f"get {path}: {r.stderr}")
    s = last_json(r.stdout)
    return {"seconds": wall, "bytes": s["bytes"], "files": s["files"], "mb_s": s["bytes"] / wall / 1e6}


def run_send_recv(binary, src, streams):
    rx = subprocess.Popen(in_ns(CLI_NS, CLI_CPU, binary, "recv", "/tmp", "--recv-path", "null", "--bind", CLI_IP, "--port",
                                RECV_PORT, "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    rx.stdout.readline()
    t0 = time.monotonic()
    tx = subprocess.run(in_ns(SRV_NS, SRV_CPU, binary, "send", src, f"sluice://{CLI_IP}:{RECV_PORT}/", "--streams", streams,
                              "--json"), capture_output=True, text=True, timeout=400, env=ENV)
    out, err = rx.communicate(timeout=60)
    wall = time.monotonic() - t0
    if tx.returncode != 0 or rx.returncode != 0:
        raise RuntimeError(f"send/recv {src}: {tx.stderr} {err}")
    s = last_json(out)
    return {"seconds": wall, "bytes": s["bytes"], "files": s["files"], "mb_s": s["bytes"] / wall / 1e6}


def run_many_gets(binary, path, clients, srv_pid, streams):
    before = cpu_seconds(srv_pid)
    t0 = time.monotonic()
    procs = [subprocess.Popen(in_ns(CLI_NS, CLI_CPU, binary, "get", f"sluice://{SRV_IP}:{GET_PORT}/{path}", "/tmp",
                                    "--recv-path", "null", "--streams", streams, "--json"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV) for _ in range(clients)]
    results = [p.communicate(timeout=400) for p in procs]
    wall = time.monotonic() - t0
    cpu = cpu_seconds(srv_pid) - before
    ok = [p.returncode == 0 for p in procs]
    total = sum(last_json(o)["bytes"] for (o, _), good in zip(results, ok) if good)
    return {"clients": clients, "complete": sum(ok), "errors": [e[-300:] for (_, e), good in zip(results, ok) if not good],
            "bytes": total, "seconds": wall, "mb_s": total / wall / 1e6, "server_cpu_s": cpu,
            "cpu_s_per_gb": cpu / (total / 1e9) if total else None}


def start_server(binary, root, port):
    srv = subprocess.Popen(in_ns(SRV_NS, SRV_CPU, binary, "serve", root, "--http", "0", "--port", port, "--bind", SRV_IP,
                                 "--threads", "1", "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    srv.stdout.readline()
    srv.stdout.readline()
    return srv


def stop_server(srv):
    srv.send_signal(signal.SIGTERM)
    out, _ = srv.communicate(timeout=60)
    return last_json(out) if out.strip() else None


def tree_before_after(a, root):
    """The minor set by get from the older server (--tree-before) and from this one, and by
    send/recv, interleaved; the client is --sluice for both gets (the wire is unchanged)."""
    servers = {}
    results = {"command": " ".join(sys.argv), "kernel": os.uname().release, "case": "minor set (tree get)"}
    try:
        servers["before"] = start_server(a.tree_before, root, GET_PORT)
        servers["after"] = start_server(a.sluice, root, GET_PORT + 2)
        rows = {"get before": [], "get after": [], "send/recv": []}
        for _ in range(a.repeats):
            rows["get before"].append(run_get(a.sluice, "minor", a.streams, port=GET_PORT))
            rows["get after"].append(run_get(a.sluice, "minor", a.streams, port=GET_PORT + 2))
            rows["send/recv"].append(run_send_recv(a.sluice, root / "minor", a.streams))
        med = {k: sorted(r["mb_s"] for r in v)[len(v) // 2] for k, v in rows.items()}
        results.update(runs=rows, median_mb_s=med, after_vs_before=med["get after"] / med["get before"],
                       after_vs_send_recv=med["get after"] / med["send/recv"],
                       before_vs_send_recv=med["get before"] / med["send/recv"])
        print(json.dumps(med), f"after/before {results['after_vs_before']:.2f}",
              f"after/send-recv {results['after_vs_send_recv']:.2f} before/send-recv {results['before_vs_send_recv']:.2f}",
              flush=True)
    finally:
        for k, srv in servers.items():
            st = stop_server(srv)
            if st:
                results[f"serve_stats_{k}"] = {x: st.get(x) for x in ("get_sessions", "get_sessions_ring", "get_sessions_ring_tree",
                                                                      "get_sessions_thread", "get_sessions_failed", "get_path")}
    return results


def warm(root):
    """Reads every file under root once: the comparison is of the movers, not of the disk."""
    for f in root.rglob("*"):
        if f.is_file():
            with open(f, "rb") as h:
                while h.read(8 << 20):
                    pass


def big_file(path, size):
    if path.exists() and path.stat().st_size == size:
        return
    with open(path, "wb") as f:
        block = os.urandom(1 << 20)
        for i in range(size >> 20):
            f.write(block[i % 4096:] + block[: i % 4096])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--data", default="/work/data/h15b/get-bench")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--streams", default="4")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--connect-back", action="store_true", help="also get with --connect-back (the server connects to the client)")
    ap.add_argument("--prepare-only", action="store_true", help="make the data and exit (outside the bench lock)")
    ap.add_argument("--tree-before", default=None, metavar="BINARY",
                    help="only the minor set: get from a server running BINARY beside one running --sluice, and send/recv")
    a = ap.parse_args()
    root = Path(a.data) / "www"
    root.mkdir(parents=True, exist_ok=True)
    if not a.tree_before:  # the tree comparison needs the minor set only
        big_file(root / "2g.bin", 2 << 30)
        big_file(root / "1g.bin", 1 << 30)
    subprocess.run([sys.executable, GEN, "--out", Path(a.data) / "sets", "--sets", "minor", "--scale", "1/16"], check=True,
                   timeout=600)
    minor = root / "minor"
    if not minor.exists():  # hard links: get leaves symlinks inside DIR out, and no second copy on disk
        shutil.copytree(Path(a.data) / "sets" / "minor", minor, copy_function=os.link)
    if a.prepare_only:
        return
    warm(root)
    subprocess.run([NETNS, "up"], check=True, env=ENV)
    if a.tree_before:
        try:
            results = tree_before_after(a, root)
        finally:
            subprocess.run([NETNS, "down"], env=ENV)
            if not a.keep:
                shutil.rmtree(a.data, ignore_errors=True)
        if a.out:
            Path(a.out).write_text(json.dumps(results, indent=1))
        return
    results = {"command": " ".join(sys.argv), "kernel": os.uname().release, "cases": {}}
    srv = None
    try:
        srv = subprocess.Popen(in_ns(SRV_NS, SRV_CPU, a.sluice, "serve", root, "--http", "0", "--port", GET_PORT, "--bind",
                                     SRV_IP, "--threads", "1", "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=ENV)
        srv.stdout.readline()
        srv.stdout.readline()
        for name, rel in (("2 GiB file", "2g.bin"), ("minor set", "minor")):
            rows = {"get": [], "send/recv": []}
            if a.connect_back:
                rows["get --connect-back"] = []
            for _ in range(a.repeats):  # interleaved: outside load drifts over all alike
                rows["get"].append(run_get(a.sluice, rel, a.streams))
                if a.connect_back:
                    rows["get --connect-back"].append(run_get(a.sluice, rel, a.streams, "--connect-back"))
                rows["send/recv"].append(run_send_recv(a.sluice, root / rel, a.streams))
            med = {k: sorted(r["mb_s"] for r in v)[len(v) // 2] for k, v in rows.items()}
            results["cases"][name] = {"runs": rows, "median_mb_s": med, "get_vs_send_recv": med["get"] / med["send/recv"]}
            print(name, json.dumps(results["cases"][name]["median_mb_s"]), f"ratio {results['cases'][name]['get_vs_send_recv']:.2f}",
                  flush=True)
        results["many_gets"] = run_many_gets(a.sluice, "1g.bin", a.clients, srv.pid, a.streams)
        print("many gets", json.dumps(results["many_gets"]), flush=True)
    finally:
        if srv:
            srv.send_signal(signal.SIGTERM)
            out, err = srv.communicate(timeout=60)
            if out.strip():
                results["serve_stats"] = last_json(out)
        subprocess.run([NETNS, "down"], env=ENV)
        if not a.keep:
            shutil.rmtree(a.data, ignore_errors=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
