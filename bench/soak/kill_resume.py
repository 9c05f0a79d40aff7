#!/usr/bin/env python3
"""Kill -9 the sender or the receiver at a random point of a mixed-tree transfer, run the same
two commands again, and check the result. For each trial: where it was killed, what the
resume skipped and sent, and the waste: data that had reached the receiver's disk before the
kill but was sent again. The claim tested: waste <= streams x block size, and the final tree
is byte-identical to the source.

usage: kill_resume.py [--trials 10] [--big-mib 96] [--small 400] [--streams 4] [--block 1M]
                      [--rate 24M] [--sluice PATH] [--json OUT]
Exits 1 if any trial breaks the claim."""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_tree(root, big_mib, small, seed):
    rng = random.Random(seed)
    (root / "small").mkdir(parents=True)
    pattern = rng.randbytes(1 << 20)
    with open(root / "big.bin", "wb") as f:
        for i in range(big_mib):
            k = (i * 7919) % len(pattern)
            f.write(pattern[k:] + pattern[:k])
    for i in range(small):
        (root / "small" / f"f{i:04d}").write_bytes(rng.randbytes(rng.randint(1, 300_000)))
    (root / "empty").write_bytes(b"")


def digest(root):
    out = {}
    for p in sorted(Path(root).rglob("*")):
        if p.is_file() and not p.name.startswith(".sluice-part"):
            out[str(p.relative_to(root))] = hashlib.blake2b(p.read_bytes(), digest_size=16).hexdigest()
    return out


def data_bytes(path):
    """Bytes of a file that hold written data. Not st_size: the receiver allocates an O_DIRECT
    file to its full size when it opens it, and ext4 reports the unwritten extents of that
    allocation as holes to SEEK_DATA/SEEK_HOLE."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size, off, total = os.fstat(fd).st_size, 0, 0
        while off < size:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after off
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            total += end - start
            off = end
        return total
    finally:
        os.close(fd)


def on_disk(dest):
    """Bytes that reached the receiver: finished files plus partial temporary files."""
    total = 0
    for p in Path(dest).rglob("*"):
        if p.is_file() and not p.name.endswith(".j"):
            total += data_bytes(p)
    return total


def trial(a, src, work, victim, rng):
    dest = work / "dest"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    port = free_port()
    url = f"sluice://127.0.0.1:{port}/?token=soak"
    recv = [a.sluice, "recv", str(dest), "--bind", "127.0.0.1", "--port", str(port), "--token", "soak", "--json"]
    send = [a.sluice, "send", str(src), url, "--streams", str(a.streams), "--block-size", a.block, "--json"]
    rx = subprocess.Popen(recv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rx.stdout.readline()
    tx = subprocess.Popen(send + ["--rate-limit", a.rate], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    delay = rng.uniform(0.3, a.window)
    time.sleep(delay)
    (rx if victim == "receiver" else tx).send_signal(signal.SIGKILL)
    tx.communicate(timeout=120)
    rx.communicate(timeout=120)
    reached = on_disk(dest)

    rx = subprocess.Popen(recv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rx.stdout.readline()
    again = subprocess.run(send, capture_output=True, text=True, timeout=300)
    out, err = rx.communicate(timeout=120)
    ok = again.returncode == 0 and rx.returncode == 0
    s = json.loads(again.stdout.splitlines()[-1]) if again.returncode == 0 else {}
    identical = ok and digest(dest / src.name) == digest(src)
    leftover = [str(p) for p in dest.rglob(".sluice-part*")]
    waste = max(0, reached - s.get("bytes_skipped", 0)) if ok else None
    bound = a.streams * parse_size(a.block)
    return {
        "victim": victim, "killed_after_s": round(delay, 2), "reached_disk": reached,
        "resume_skipped": s.get("bytes_skipped"), "resume_sent": s.get("bytes_sent"), "waste": waste,
        "waste_bound": bound, "identical": identical, "leftovers": len(leftover),
        "ok": ok and identical and not leftover and waste is not None and waste <= bound,
        "error": None if ok else (again.stderr + err)[-400:],
    }


def parse_size(t):
    return int(t[:-1]) << {"K": 10, "M": 20, "G": 30}[t[-1]] if t[-1] in "KMG" else int(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--big-mib", type=int, default=96)
    ap.add_argument("--small", type=int, default=400)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--block", default="1M")
    ap.add_argument("--rate", default="24M")
    ap.add_argument("--window", type=float, default=4.0, help="kill within this many seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sluice", default=str(ROOT / "build/tools/sluice"))
    ap.add_argument("--json")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory(prefix="sluice-soak-") as tmp:
        work = Path(tmp)
        src = work / "tree"
        make_tree(src, a.big_mib, a.small, a.seed)
        rows = []
        for victim in ("sender", "receiver"):
            for i in range(a.trials):
                r = trial(a, src, work, victim, rng)
                rows.append(r)
                print(f"{victim} trial {i + 1}: killed at {r['killed_after_s']} s, on disk {r['reached_disk'] >> 20} MiB, "
                      f"resume skipped {(r['resume_skipped'] or 0) >> 20} MiB sent {(r['resume_sent'] or 0) >> 20} MiB, "
                      f"waste {r['waste']} B (bound {r['waste_bound']}), identical {r['identical']}"
                      + ("" if r["ok"] else f"  FAILED {r['error']}"), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if not r["ok"]]
    print(f"{len(rows) - len(bad)} passed, {len(bad)} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
