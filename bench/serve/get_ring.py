#!/usr/bin/env python3
"""N concurrent `sluice get` clients of one cached file (issue 15, h15g; namespaces and
encryption h15i): the get ring (single files: one io_uring thread for every transfer, TLS
included) against the session-thread path it replaced for them (1 + streams threads per
session; forced here with `get --connect-back`, which keeps a get off the ring: the server
connects to the client then, the one difference besides the path; until h15r a
--get-rate-limit far above any rate forced it, but the ring paces such gets itself now). Alternating, a fresh server per run, the file read once before (cached); receivers
discard (--recv-path null). Per run: aggregate MB/s, the server's CPU seconds per GB (utime +
stime of its process), its peak thread count and the growth of its resident memory over the
run (VmHWM minus VmRSS at start) per session.
  --net loopback (default): server and clients on 127.0.0.1, in clear (a loopback receiver does
      not encrypt);
  --net ns: server in one network namespace pinned to CPU 0, clients in another pinned to CPU 1,
      joined by a veth (bench/testbed/netns.sh, names of our own): the clients' receivers see
      a server not on loopback and encrypt (TLS 1.3, user-space records: no kTLS here), the
      main use of a server.
  --tree FILES (h15j): the clients get a tree of FILES files of the minor set's sizes (1-400
      KiB, seeded) in a few directories instead of one file; files/s is reported too.
  --cold (h15j): the file (or tree) is dropped from the page cache before each run, so the
      ring's blocks are read by the pool, and sessions meet blocks another one is still reading
      (-v's counts per get are summed: sealed on the ring, on the pool, of these still being read).
Which path each get took is counted from the server's -v (ring_gets / thread_gets): since h15r
a tree is sent by the ring too, so --tree compares the two paths for trees.
  /work/brief/bin/bench-lock timeout 470 python3 bench/serve/get_ring.py --net ns --out /tmp/get_ring.json
Bounded: fixed rounds, a timeout on every command; the file lives under --data, deleted at the end."""
import argparse
import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

from get import big_file, cpu_seconds, last_json
from large import drop_file

HERE = Path(__file__).resolve().parent
NETNS = HERE.parent / "testbed" / "netns.sh"
ENV = dict(os.environ, SLUICE_TOKEN="benchtoken", SB_NS_SND="h15j-gr-cli", SB_NS_RCV="h15j-gr-srv", SB_IP_SND="10.213.37.1",
           SB_IP_RCV="10.213.37.2")


def placed(net, side, cmd):
    """cmd run where this --net puts the server ("srv") or a client ("cli"), in a session of its
    own (h15k): with the kernel's autogroups on (this machine's default), a session is one
    scheduling group whose weight on a CPU follows its share of the group's runnable threads
    there. Server and clients in the bench's one session made the server's share of CPU 0
    against other load follow how many threads it had: one get ring got 0.66-0.72x the rate of
    the session threads' 5 in the same run, 0.98x in sessions of their own (docs/benchmarks.md).
    A server is its own session wherever it runs; setsid execs (no fork: the pid stays)."""
    cmd = ["setsid", *map(str, cmd)]
    if net == "loopback":
        return cmd
    ns, cpu = (ENV["SB_NS_RCV"], "0") if side == "srv" else (ENV["SB_NS_SND"], "1")
    return ["ip", "netns", "exec", ns, "taskset", "-c", cpu, *cmd]


def status_kb(pid, key):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def minor_tree(root, files, seed=15):
    """files files of 1-400 KiB (the minor set's range) in 16 directories of 4 parents,
    incompressible; returns their total bytes."""
    import random
    rng = random.Random(seed)
    pattern = rng.randbytes(1 << 20)
    total = 0
    for i in range(files):
        d = root / f"d{i % 4}" / f"e{i % 16}"
        d.mkdir(parents=True, exist_ok=True)
        size = rng.randint(1 << 10, 400 << 10)
        k = rng.randrange(len(pattern) - size)
        (d / f"f{i:05d}.bin").write_bytes(pattern[k:k + size])
        total += size
    return total


def drop_cache(path):
    for f in ([path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]):
        drop_file(f)


def one_run(binary, root, name, clients, streams, mode, net, cold=False):
    if cold:
        drop_cache(root / name)
    paths = {"cold": cold}
    run = measured(binary, root, name, clients, streams, mode, net, paths)
    return {**run, **paths}


def measured(binary, root, name, clients, streams, mode, net, paths):
    extra = ["--connect-back"] if mode == "thread" else []
    bind = "127.0.0.1" if net == "loopback" else ENV["SB_IP_RCV"]
    # --max-gets exactly the clients: attached connections hold no session slot (since h15i).
    srv = subprocess.Popen(placed(net, "srv", [binary, "serve", str(root), "--port", "0", "--bind", bind, "--threads", "2",
                                               "--max-gets", str(clients), "-v"]),
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
                                                      "--json", *extra]),
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
        files = sum(last_json(o).get("files", 0) for o, _ in outs)
        encryption = sorted({last_json(o)["encryption"] for o, _ in outs})
        return {"mode": mode, "net": net, "encryption": encryption, "clients": clients, "streams": streams, "bytes": total, "seconds": wall,
                "mb_s": total / wall / 1e6, "files": files, "files_s": files / wall, "server_cpu_s": cpu, "cpu_s_per_gb": cpu / (total / 1e9),
                "peak_threads": peak_threads[0], "rss_growth_kib_per_session": (hwm - rss0) / clients}
    finally:
        srv.terminate()
        _, err = srv.communicate(timeout=60)
        if srv.returncode not in (0, -15):
            print(f"server exit {srv.returncode}: {err[-300:]}", flush=True)
        paths["ring_gets"] = err.count("(on the get ring")
        paths["thread_gets"] = err.count("sent by a session thread")
        for key, rx in (("ring_sealed", r"blocks sealed on the ring (\d+)"), ("pool_sealed", r"on the pool \(not in the page cache\) (\d+)"),
                        ("pool_still_read", r"in the cache but still being read (\d+)")):
            paths[key] = sum(int(m) for m in re.findall(rx, err))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--data", default="/work/data/h15j/get-ring")
    ap.add_argument("--net", choices=["loopback", "ns"], default="loopback")
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cold", action="store_true", help="drop the file(s) from the page cache before each run")
    ap.add_argument("--tree", type=int, default=0, help="get a tree of this many minor-sized files instead")
    ap.add_argument("--sluice-b", default=None,
                    help="a second build, its ring mode run beside the first's in every round (an A/B of a change; "
                         "the session threads are run by the first build only)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    root = Path(a.data)
    root.mkdir(parents=True, exist_ok=True)
    try:
        if a.tree:
            name = "tree"
            if not (root / name).is_dir():
                print(f"tree: {a.tree} files, {minor_tree(root / name, a.tree) / 1e6:.1f} MB", flush=True)
            subprocess.run(f"cat $(find {root / name} -type f) >/dev/null", shell=True, check=True, timeout=120)  # cached
        else:
            name = "one.bin"
            big_file(root / name, a.size_mib << 20)
            subprocess.run(["cat", str(root / name)], stdout=subprocess.DEVNULL, check=True, timeout=120)  # cached
        if a.net == "ns":
            subprocess.run([NETNS, "up"], check=True, env=ENV, capture_output=True)
        runs = []
        order = [("ring", "a", a.sluice)] + ([("ring", "b", a.sluice_b)] if a.sluice_b else []) + [("thread", "a", a.sluice)]
        for r in range(a.rounds):
            for mode, build, binary in (order if r % 2 == 0 else order[::-1]):  # who goes first alternates
                runs.append({**one_run(binary, root, name, a.clients, a.streams, mode, a.net, a.cold), "build": build,
                             "round": r})
                print(json.dumps(runs[-1]), flush=True)
        if a.out:
            Path(a.out).write_text(json.dumps(runs, indent=1))
    finally:
        if a.net == "ns":
            subprocess.run([NETNS, "down"], env=ENV, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
