#!/usr/bin/env python3
"""N concurrent `sluice get` clients of one cached file on loopback (issue 15, h15g): the get
ring (single files: one io_uring thread for every transfer) against the session-thread path it
replaced for them (1 + streams threads per session; forced here with a --get-rate-limit far
above any rate, which keeps a get off the ring). Alternating, a fresh server per run, the file
read once before (cached); receivers discard (--recv-path null). Per run: aggregate MB/s, the
server's CPU seconds per GB (utime + stime of its process), its peak thread count and the
growth of its resident memory over the run (VmHWM minus VmRSS at start) per session.
Loopback only: the ring takes clients whose receivers do not encrypt (a loopback peer), so the
namespace testbed of get.py (a veth, encryption on by default) would measure the thread path.
  /work/brief/bin/bench-lock python3 bench/serve/get_ring.py --out /tmp/get_ring.json
Bounded: fixed rounds, a timeout on every command; the file lives under --data, deleted at the end."""
import argparse
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from get import big_file, cpu_seconds, last_json

HERE = Path(__file__).resolve().parent
ENV = dict(os.environ, SLUICE_TOKEN="benchtoken")


def status_kb(pid, key):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def one_run(binary, root, name, clients, streams, mode):
    extra = ["--get-rate-limit", "1000G"] if mode == "thread" else []
    srv = subprocess.Popen([binary, "serve", str(root), "--port", "0", "--bind", "127.0.0.1", "--threads", "2",
                            # room over the clients: on the thread path each attached connection holds a
                            # session slot while its thread hands it over (refused as busy at --max-gets N)
                            "--max-gets", str(8 * clients), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=ENV)
    try:
        srv.stdout.readline()
        url = srv.stdout.readline().strip().split("?")[0] + name + "?token=benchtoken"
        rss0 = status_kb(srv.pid, "VmRSS")
        peak_threads = [0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak_threads[0] = max(peak_threads[0], status_kb(srv.pid, "Threads"))
                time.sleep(0.01)

        t = threading.Thread(target=sample)
        t.start()
        before = cpu_seconds(srv.pid)
        t0 = time.monotonic()
        procs = [subprocess.Popen([binary, "get", url, "/tmp", "--recv-path", "null", "--streams", str(streams), "--json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV) for _ in range(clients)]
        outs = [p.communicate(timeout=300) for p in procs]
        wall = time.monotonic() - t0
        cpu = cpu_seconds(srv.pid) - before
        done.set()
        t.join()
        hwm = status_kb(srv.pid, "VmHWM")
        bad = [e[-300:] for p, (_, e) in zip(procs, outs) if p.returncode != 0]
        if bad:
            raise RuntimeError(f"{mode}: {bad}")
        total = sum(last_json(o)["bytes"] for o, _ in outs)
        return {"mode": mode, "clients": clients, "streams": streams, "bytes": total, "seconds": wall,
                "mb_s": total / wall / 1e6, "server_cpu_s": cpu, "cpu_s_per_gb": cpu / (total / 1e9),
                "peak_threads": peak_threads[0], "rss_growth_kib_per_session": (hwm - rss0) / clients}
    finally:
        srv.terminate()
        srv.communicate(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--data", default="/work/data/h15g/get-ring")
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    root = Path(a.data)
    root.mkdir(parents=True, exist_ok=True)
    try:
        big_file(root / "one.bin", a.size_mib << 20)
        subprocess.run(["cat", str(root / "one.bin")], stdout=subprocess.DEVNULL, check=True, timeout=120)  # cached
        runs = []
        for r in range(a.rounds):
            for mode in (["ring", "thread"] if r % 2 == 0 else ["thread", "ring"]):
                runs.append(one_run(a.sluice, root, "one.bin", a.clients, a.streams, mode))
                print(json.dumps(runs[-1]), flush=True)
        if a.out:
            Path(a.out).write_text(json.dumps(runs, indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
