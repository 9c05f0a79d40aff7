#!/usr/bin/env python3
"""The cost of exact attribute lists (issue 17, session 15, docs/protocol.md "Exact attributes"):
a no-change update of a tree, one sluice build beside another (main's) in the same run, over
loopback, as root (xattrs and ACLs on by default).

usage: run.py DATA_DIR --old OLD_SLUICE [--new NEW_SLUICE] [--files N] [--rounds R] [--xattr] [--out FILE.json]

A tree of N 1 KiB files (100 directories); with --xattr each file has one 16-byte user.
attribute (then every entry is applied at the end by both builds, and the new one lists its
attributes there; without, the new one lists each unchanged file's attributes in the quick
check). Each build first copies the tree into its own destination (not timed); then per round
(alternating which build goes first) it sends the unchanged tree again: wall seconds from the
sender's start to both sides' exit, each side started in its own session (setsid: the kernel's
autogroups would otherwise weight the two by thread count). The source is read once before
each run (warm). Medians over the rounds. Take the bench lock around it.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def make_tree(src, n, xattr):
    mark = src / ".done"
    if mark.exists():
        return
    shutil.rmtree(src, ignore_errors=True)
    for i in range(n):
        d = src / f"d{i % 100:02d}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"f{i:06d}"
        p.write_bytes(os.urandom(1024))
        if xattr:
            os.setxattr(p, "user.tag", os.urandom(16))
    mark.write_bytes(b"")


def warm(src):
    for dirpath, _, files in os.walk(src):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                fh.read()


def one(binary, src, dest):
    rx = subprocess.Popen(["setsid", binary, "recv", str(dest), "--token", "bench", "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        url = rx.stdout.readline().strip()
        t0 = time.monotonic()
        s = subprocess.run(["setsid", binary, "send", str(src), url, "--token", "bench", "--json"],
                           capture_output=True, text=True, timeout=300)
        rx.communicate(timeout=300)
        wall = time.monotonic() - t0
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.communicate()
    if s.returncode != 0 or rx.returncode != 0:
        sys.exit(f"{binary}: send {s.returncode} recv {rx.returncode}: {s.stderr[-2000:]}")
    return wall, json.loads(s.stdout.splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "tools", "sluice"))
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--xattr", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    data = Path(a.data_dir)
    tag = "x" if a.xattr else "plain"
    src = data / f"exact-src-{tag}"
    make_tree(src, a.files, a.xattr)
    builds = {"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)}
    dests = {k: data / f"exact-dest-{tag}-{k}" for k in builds}
    for k, b in builds.items():
        shutil.rmtree(dests[k], ignore_errors=True)
        dests[k].mkdir()
        one(b, src, dests[k])
    res = {k: [] for k in builds}
    for r in range(a.rounds):
        for k in (list(builds) if r % 2 == 0 else list(reversed(builds))):
            warm(src)
            wall, stats = one(builds[k], src, dests[k])
            if stats.get("bytes_sent", 0) != 0:
                sys.exit(f"{k}: the update sent {stats['bytes_sent']} bytes: not a no-change update")
            res[k].append(wall)
    med = {k: statistics.median(v) for k, v in res.items()}
    out = {"command": " ".join(sys.argv), "files": a.files, "xattr": a.xattr, "runs": res, "median": med,
           "ratio_new_to_old": med["new"] / med["old"]}
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
