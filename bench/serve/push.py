#!/usr/bin/env python3
"""`sluice send` pushing into `sluice serve DIR --port P --allow-upload` beside `sluice send` ->
`sluice recv DIR` (issue 15 holds pushes to gets' goal: "within 10% of send/recv"), same data,
same run, alternating.

Sender in one network namespace (CPU 1), the receiving side in the other (CPU 0), joined by a
veth pair (bench/testbed/netns.sh, names of our own), each side started with setsid (h15k:
autogroups). Both write to disk (a push is stored: there is no null path into DIR), into a
directory emptied and synced before each run, outside the timed part; both negotiate TLS 1.3
as they would (veth addresses are not loopback). Time: the sender's wall time, which ends once
the receiving side verified and renamed everything (FINAL_STATUS). Cases: one 2 GiB file; the
minor set (bench/datasets/gen.py --scale 1/64 --sets minor). With --before BINARY (main's build,
copied outside the tree), a second server of that binary on its own port takes the same pushes
in the same rounds ("push (before)"); the servers' thread counts are sampled every 20 ms during
each push (the peak, beside the count at rest), and per run the server CPU's busy share
(/proc/stat, all but idle and iowait: other processes on that CPU count too), the disk's
(/proc/diskstats io_ticks of the busiest disk) and, for a serve, its own CPU seconds. Each receiving directory is emptied after its
run too, so that at most one copy of a case is on disk beside the source.
Run it under the bench lock (data made first, outside it, with --prepare-only):
  python3 bench/serve/push.py --prepare-only
  /work/brief/bin/bench-lock timeout 470 python3 bench/serve/push.py --out /tmp/push.json
Every command has a timeout. Data under --data (deleted with --clean)."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from get import big_file  # bench/serve/get.py: the same 2 GiB file

HERE = Path(__file__).resolve().parent
NETNS = HERE.parent / "testbed" / "netns.sh"
GEN = HERE.parent / "datasets" / "gen.py"
ENV = dict(os.environ, SB_NS_SND="h15s-push-cli", SB_NS_RCV="h15s-push-srv", SB_IP_SND="10.213.26.1",
           SB_IP_RCV="10.213.26.2", SLUICE_TOKEN="benchtoken")
SRV_NS, CLI_NS, SRV_IP = ENV["SB_NS_RCV"], ENV["SB_NS_SND"], ENV["SB_IP_RCV"]
SRV_CPU, CLI_CPU = "0", "1"
SERVE_PORT, RECV_PORT, BEFORE_PORT = 7100, 7101, 7102


def in_ns(ns, cpu, *cmd):
    return ["ip", "netns", "exec", ns, "taskset", "-c", cpu, "setsid", *map(str, cmd)]


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def empty(d):
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    subprocess.run(["sync"], timeout=300)


def run_send(binary, src, port, streams):
    t0 = time.monotonic()
    tx = subprocess.run(in_ns(CLI_NS, CLI_CPU, binary, "send", src, f"sluice://{SRV_IP}:{port}/", "--streams", streams,
                              "--json"), capture_output=True, text=True, timeout=400, env=ENV)
    wall = time.monotonic() - t0
    if tx.returncode != 0:
        raise RuntimeError(f"send {src} to port {port}: {tx.stderr}")
    s = last_json(tx.stdout)
    return {"seconds": wall, "bytes": s["bytes"], "files": s["files"], "mb_s": s["bytes"] / wall / 1e6,
            "encryption": s.get("encryption")}


def threads(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def cpu_seconds(pid):
    """utime + stime of the process (its exited threads included), seconds."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def cpu_busy_ticks(cpu):
    """(busy, total) jiffies of one CPU (/proc/stat): busy is all but idle and iowait."""
    for line in Path("/proc/stat").read_text().splitlines():
        f = line.split()
        if f[0] == f"cpu{cpu}":
            v = list(map(int, f[1:]))
            return sum(v) - v[3] - v[4], sum(v)
    return 0, 1


def disk_ms():
    """Milliseconds the busiest disk was busy so far (/proc/diskstats io_ticks)."""
    best = 0
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2].startswith(("vd", "sd", "nvme")) and not f[2][-1].isdigit():
            best = max(best, int(f[12]))
    return best


def run_push(binary, src, dest, streams, port=SERVE_PORT, server_pid=None):
    """A push; with server_pid, the server's thread count at rest and its peak during the push,
    its CPU seconds, the server CPU's busy share and the disk's busy share over the push."""
    empty(dest)
    rest, peak, done = threads(server_pid) if server_pid else 0, [0], threading.Event()
    cpu0, busy0, disk0, t0 = cpu_seconds(server_pid) if server_pid else 0.0, cpu_busy_ticks(SRV_CPU), disk_ms(), time.monotonic()

    def sample():
        while not done.wait(0.02):
            peak[0] = max(peak[0], threads(server_pid))

    sampler = threading.Thread(target=sample) if server_pid else None
    if sampler:
        sampler.start()
    try:
        r = run_send(binary, src, port, streams)
    finally:
        done.set()
        if sampler:
            sampler.join()
    busy1, wall = cpu_busy_ticks(SRV_CPU), time.monotonic() - t0
    r["server_cpu_busy"] = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
    r["disk_busy"] = (disk_ms() - disk0) / 1000 / wall
    if server_pid:
        r["server_cpu_s"] = cpu_seconds(server_pid) - cpu0
    empty(dest)
    if server_pid:
        r["server_threads_rest"], r["server_threads_peak"] = rest, peak[0]
    return r


def run_send_recv(binary, src, dest, streams):
    empty(dest)
    rx = subprocess.Popen(in_ns(SRV_NS, SRV_CPU, binary, "recv", dest, "--bind", SRV_IP, "--port", RECV_PORT, "--json"),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    rx.stdout.readline()
    try:
        busy0, disk0, t0 = cpu_busy_ticks(SRV_CPU), disk_ms(), time.monotonic()
        r = run_send(binary, src, RECV_PORT, streams)
        busy1, wall = cpu_busy_ticks(SRV_CPU), time.monotonic() - t0
        r["server_cpu_busy"] = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
        r["disk_busy"] = (disk_ms() - disk0) / 1000 / wall
        _, err = rx.communicate(timeout=120)
        if rx.returncode != 0:
            raise RuntimeError(f"recv: {err}")
        empty(dest)
        return r
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.communicate(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--data", default="/work/data/h15p/push-bench")
    ap.add_argument("--before", default=None, help="another build's sluice: its serve takes the same pushes (\"push (before)\")")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--streams", default="4")
    ap.add_argument("--cases", default="2g,minor")
    ap.add_argument("--out", default=None)
    ap.add_argument("--prepare-only", action="store_true", help="make the data and exit (outside the bench lock)")
    ap.add_argument("--clean", action="store_true", help="delete the data and exit")
    a = ap.parse_args()
    data = Path(a.data)
    if a.clean:
        shutil.rmtree(data, ignore_errors=True)
        return
    src = data / "src"
    src.mkdir(parents=True, exist_ok=True)
    big_file(src / "2g.bin", 2 << 30)
    subprocess.run([sys.executable, GEN, "--out", data / "sets", "--sets", "minor", "--scale", "1/64"], check=True, timeout=600)
    if a.prepare_only:
        return
    for f in src.rglob("*"):  # warm: the comparison is of the movers, not of the source disk
        if f.is_file():
            with open(f, "rb") as h:
                while h.read(8 << 20):
                    pass
    for f in (data / "sets" / "minor").rglob("*"):
        if f.is_file():
            f.read_bytes()
    served, received = data / "served", data / "received"
    served.mkdir(exist_ok=True)
    subprocess.run([NETNS, "up"], check=True, env=ENV)
    results = {"command": " ".join(sys.argv), "kernel": os.uname().release, "load": os.getloadavg(), "cases": {}}
    srv = before = None
    served_before = data / "served-before"

    def serve(binary, d, port):
        d.mkdir(exist_ok=True)
        p = subprocess.Popen(in_ns(SRV_NS, SRV_CPU, binary, "serve", d, "--http", "0", "--port", port, "--bind", SRV_IP,
                                   "--threads", "1", "--allow-upload", "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=ENV)
        p.stdout.readline()
        p.stdout.readline()
        return p

    try:
        srv = serve(a.sluice, served, SERVE_PORT)
        if a.before:
            before = serve(a.before, served_before, BEFORE_PORT)
        cases = {"2g": ("2 GiB file", src / "2g.bin"), "minor": ("minor set 1/64", data / "sets" / "minor")}
        for key in a.cases.split(","):
            name, path = cases[key]
            rows = {"push": [], "send/recv": []}
            if before:
                rows["push (before)"] = []
            for i in range(a.repeats):  # interleaved, the order rotating each round: a drift favours none
                order = list(rows)
                order = order[i % len(order):] + order[:i % len(order)]
                for which in order:
                    if which == "push":
                        rows[which].append(run_push(a.sluice, path, served, a.streams, SERVE_PORT, srv.pid))
                    elif which == "push (before)":
                        rows[which].append(run_push(a.sluice, path, served_before, a.streams, BEFORE_PORT, before.pid))
                    else:
                        rows["send/recv"].append(run_send_recv(a.sluice, path, received, a.streams))
            med = {k: sorted(r["mb_s"] for r in v)[len(v) // 2] for k, v in rows.items()}
            results["cases"][name] = {"runs": rows, "median_mb_s": med, "push_vs_send_recv": med["push"] / med["send/recv"]}
            line = [name, json.dumps(med), f"push/send-recv {med['push'] / med['send/recv']:.3f}"]
            if before:
                results["cases"][name]["push_vs_before"] = med["push"] / med["push (before)"]
                line.append(f"push/before {med['push'] / med['push (before)']:.3f}")
            for k, v in rows.items():
                line += [f"runs {k}", [round(r["mb_s"]) for r in v]]
                line += ["server cpu busy / disk busy", [(round(r["server_cpu_busy"], 2), round(r["disk_busy"], 2)) for r in v]]
                if "server_cpu_s" in v[0]:
                    line += ["server cpu s", [round(r["server_cpu_s"], 2) for r in v]]
                if "server_threads_peak" in v[0]:
                    line += ["threads rest/peak", [(r["server_threads_rest"], r["server_threads_peak"]) for r in v]]
            print(*line, flush=True)
    finally:
        if before:
            before.send_signal(signal.SIGTERM)
            before.communicate(timeout=60)
        if srv:
            srv.send_signal(signal.SIGTERM)
            out, _ = srv.communicate(timeout=60)
            if out.strip():
                st = last_json(out)
                results["serve_stats"] = {k: st.get(k) for k in ("pushes", "pushes_done", "pushes_failed", "pushes_refused",
                                                                 "push_bytes", "push_path", "push_streams_ring")}
        subprocess.run([NETNS, "down"], env=ENV)
        shutil.rmtree(served, ignore_errors=True)
        shutil.rmtree(served_before, ignore_errors=True)
        shutil.rmtree(received, ignore_errors=True)
    results["load_after"] = os.getloadavg()
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
