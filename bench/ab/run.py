#!/usr/bin/env python3
"""A/B of sluice builds or options: the same source moved file to file over loopback by each
variant in turn, order alternating every round (this VM drifts), medians per variant.
Throughput is bytes over the wall time from the sender's start to both sides' exit; CPU is
what each side reports in its --json stats (its own rusage, user + system).

usage: run.py SRC ROUNDS VARIANT... [--out DIR]
  VARIANT is BINARY or 'BINARY|SEND ARGS|RECV ARGS', for example
  run.py /data/2g.bin 8 /tmp/sluice-old /tmp/sluice-new
  run.py /data/2g.bin 8 'build/tools/sluice|--send-path splice' 'build/tools/sluice|--send-path sendfile'
  run.py /data/2g.bin 8 /tmp/sluice-old /tmp/sluice-new --pipe

--pipe: pipe mode instead of files: `cat SRC | sluice send - URL` into
`sluice recv --stdout PORT > /dev/null` (SRC a file); CPU is the two sluice processes' own.

Each run receives into a fresh directory under DIR (default /tmp/sluice-ab, flagged chattr +T)
and the source is read before every run, so both variants start with it in the page cache.
Received trees are deleted only at the end when they all fit in half the free space: on this
VM's journal-less ext4 a create near inodes deleted in the last minute scans them all
(docs/bench-wdt-report.md), which made single rounds of a small-file set 3x slower. After
deleting trees, wait a minute (six if they were not synced) before timing small files again. Take
/run/sluice-bench.lock (flock) so that other benches do not overlap.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_variant(spec):
    parts = spec.split("|")
    return parts[0], parts[1].split() if len(parts) > 1 else [], parts[2].split() if len(parts) > 2 else []


def source_bytes(src):
    if os.path.isfile(src):
        return os.path.getsize(src)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(src) for f in fs)


def read_source(src):
    paths = [src] if os.path.isfile(src) else [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs]
    for p in paths:
        with open(p, "rb") as f:
            while f.read(8 << 20):
                pass


def one_pipe_run(variant, src):
    binary, send_args, recv_args = parse_variant(variant)
    port = free_port()
    with open(os.devnull, "wb") as null:
        rx = subprocess.Popen([binary, "recv", "--stdout", str(port), "--bind", "127.0.0.1", "--token", "ab", "--json", *recv_args],
                              stdout=null, stderr=subprocess.PIPE, text=True)
        rx.stderr.readline()  # the URL line: the receiver is listening
        t0 = time.monotonic()
        cat = subprocess.Popen(["cat", src], stdout=subprocess.PIPE)
        tx = subprocess.run([binary, "send", "-", "--to", f"127.0.0.1:{port}", "--token", "ab", "--json", *send_args],
                            stdin=cat.stdout, capture_output=True, text=True, timeout=600)
        cat.stdout.close()
        cat.wait(timeout=60)
        err = rx.communicate(timeout=60)[1]
    secs = time.monotonic() - t0
    if tx.returncode or rx.returncode:
        raise RuntimeError(f"{variant}: send exit {tx.returncode}: {tx.stderr.strip()}; recv exit {rx.returncode}: {err.strip()}")
    js = json.loads(tx.stdout.strip().splitlines()[-1])
    jr = json.loads([l for l in err.strip().splitlines() if l.startswith("{")][-1])
    return secs, js["cpu_user_s"] + js["cpu_sys_s"], jr["cpu_user_s"] + jr["cpu_sys_s"]


def one_run(variant, src, dst):
    binary, send_args, recv_args = parse_variant(variant)
    port = free_port()
    rx = subprocess.Popen([binary, "recv", dst, "--bind", "127.0.0.1", "--port", str(port), "--token", "ab", "--json", *recv_args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rx.stdout.readline()  # the URL line: the receiver is listening
    t0 = time.monotonic()
    tx = subprocess.run([binary, "send", src, "--to", f"127.0.0.1:{port}", "--token", "ab", "--json", *send_args],
                        capture_output=True, text=True, timeout=600)
    out, err = rx.communicate(timeout=60)
    secs = time.monotonic() - t0
    if tx.returncode or rx.returncode:
        raise RuntimeError(f"{variant}: send exit {tx.returncode}: {tx.stderr.strip()}; recv exit {rx.returncode}: {err.strip()}")
    js, jr = json.loads(tx.stdout.strip().splitlines()[-1]), json.loads(out.strip().splitlines()[-1])
    return secs, js["cpu_user_s"] + js["cpu_sys_s"], jr["cpu_user_s"] + jr["cpu_sys_s"]


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("src")
    ap.add_argument("rounds", type=int)
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--out", default="/tmp/sluice-ab")
    ap.add_argument("--pipe", action="store_true")
    ap.add_argument("--delete-each", action="store_true",
                    help="delete each received tree after its run (a disk budget), not all at the end")
    a = ap.parse_args()
    size = source_bytes(a.src)
    gb = size / 1e9
    os.makedirs(a.out, exist_ok=True)
    subprocess.run(["chattr", "+T", a.out], capture_output=True)
    runs = {v: [] for v in a.variants}
    st = os.statvfs(a.out)
    keep = not a.delete_each and size * a.rounds * len(a.variants) < st.f_bavail * st.f_frsize // 2
    kept = []
    n = 0
    for r in range(a.rounds):
        for v in a.variants if r % 2 == 0 else a.variants[::-1]:
            n += 1
            read_source(a.src)
            if a.pipe:
                secs, cs, cr = one_pipe_run(v, a.src)
            else:
                dst = os.path.join(a.out, f"run-{os.getpid()}-{n}")
                os.makedirs(dst)
                secs, cs, cr = one_run(v, a.src, dst)
                if keep:
                    kept.append(dst)
                else:
                    shutil.rmtree(dst)
            runs[v].append({"seconds": secs, "cpu_send": cs, "cpu_recv": cr})
            print(f"round {r + 1} {v}: {size / secs / 1e6:.0f} MB/s, CPU s/GB send {cs / gb:.3f} recv {cr / gb:.3f}", flush=True)
    for d in kept:
        shutil.rmtree(d)
    os.sync()  # deleted inodes' table blocks written: the next minute, not six, is affected
    print("| variant | MB/s (median) | CPU s/GB send | CPU s/GB recv | CPU s/GB total |")
    print("|---|---|---|---|---|")
    for v, rs in runs.items():
        mb = size / statistics.median(x["seconds"] for x in rs) / 1e6
        cs = statistics.median(x["cpu_send"] for x in rs) / gb
        cr = statistics.median(x["cpu_recv"] for x in rs) / gb
        print(f"| {v} | {mb:.0f} | {cs:.3f} | {cr:.3f} | {cs + cr:.3f} |")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"src": a.src, "bytes": size, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
