#!/usr/bin/env python3
"""N concurrent `sluice get` clients of one cached file (issue 15, h15g; namespaces and
encryption h15i): the get ring (single files: one io_uring thread for every transfer, TLS
included) against the session-thread path it replaced for them (1 + streams threads per
session; forced here with a --get-rate-limit far above any rate, which keeps a get off the
ring). Alternating, a fresh server per run, the file read once before (cached); receivers
discard (--recv-path null). Per run: aggregate MB/s, the server's CPU seconds per GB (utime +
stime of its process), its peak thread count and the growth of its resident memory over the
run (VmHWM minus VmRSS at start) per session.
  --net loopback (default): server and clients on 127.0.0.1, in clear (a loopback receiver does
      not encrypt);
  --net ns: server in one network namespace pinned to CPU 0, clients in another pinned to CPU 1,
      joined by a veth (bench/testbed/netns.sh, names of our own): the clients' receivers see
      a server not on loopback and encrypt (TLS 1.3, user-space records: no kTLS here), the
      main use of a server.
  /work/brief/bin/bench-lock timeout 470 python3 bench/serve/get_ring.py --net ns --out /tmp/get_ring.json
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
NETNS = HERE.parent / "testbed" / "netns.sh"
ENV = dict(os.environ, SLUICE_TOKEN="benchtoken", SB_NS_SND="h15i-gr-cli", SB_NS_RCV="h15i-gr-srv", SB_IP_SND="10.213.35.1",
           SB_IP_RCV="10.213.35.2")


def placed(net, side, cmd):
    """cmd run where this --net puts the server ("srv") or a client ("cli")."""
    if net == "loopback":
        return cmd
    ns, cpu = (ENV["SB_NS_RCV"], "0") if side == "srv" else (ENV["SB_NS_SND"], "1")
    return ["ip", "netns", "exec", ns, "taskset", "-c", cpu, *map(str, cmd)]


def status_kb(pid, key):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def one_run(binary, root, name, clients, streams, mode, net):
    extra = ["--get-rate-limit", "1000G"] if mode == "thread" else []
    bind = "127.0.0.1" if net == "loopback" else ENV["SB_IP_RCV"]
    # --max-gets exactly the clients: attached connections hold no session slot (since h15i).
    srv = subprocess.Popen(placed(net, "srv", [binary, "serve", str(root), "--port", "0", "--bind", bind, "--threads", "2",
                                               "--max-gets", str(clients), *extra]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
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
        procs = [subprocess.Popen(placed(net, "cli", [binary, "get", url, "/tmp", "--recv-path", "null", "--streams", str(streams),
                                                      "--json"]),
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
        encryption = sorted({last_json(o)["encryption"] for o, _ in outs})
        return {"mode": mode, "net": net, "encryption": encryption, "clients": clients, "streams": streams, "bytes": total, "seconds": wall,
                "mb_s": total / wall / 1e6, "server_cpu_s": cpu, "cpu_s_per_gb": cpu / (total / 1e9),
                "peak_threads": peak_threads[0], "rss_growth_kib_per_session": (hwm - rss0) / clients}
    finally:
        srv.terminate()
        _, err = srv.communicate(timeout=60)
        if srv.returncode not in (0, -15):
            print(f"server exit {srv.returncode}: {err[-300:]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--data", default="/work/data/h15i/get-ring")
    ap.add_argument("--net", choices=["loopback", "ns"], default="loopback")
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
        if a.net == "ns":
            subprocess.run([NETNS, "up"], check=True, env=ENV, capture_output=True)
        runs = []
        for r in range(a.rounds):
            for mode in (["ring", "thread"] if r % 2 == 0 else ["thread", "ring"]):
                runs.append(one_run(a.sluice, root, "one.bin", a.clients, a.streams, mode, a.net))
                print(json.dumps(runs[-1]), flush=True)
        if a.out:
            Path(a.out).write_text(json.dumps(runs, indent=1))
    finally:
        if a.net == "ns":
            subprocess.run([NETNS, "down"], env=ENV, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
