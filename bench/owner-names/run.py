#!/usr/bin/env python3
"""Owners by name and --dry-run's attribute compare (issue 17, session 12): one sluice build
beside another (the branch point's) in the same run, over loopback.

usage: run.py DATA_DIR --old OLD_SLUICE [--new NEW_SLUICE] [--files N] [--rounds R] [--out FILE.json]

A tree of N 1 KiB files (100 directories) owned by daemon:daemon, each with one 16-byte
user. attribute. Per round and per build (alternating which goes first), each build's own
sender and receiver:
  send     the tree into an empty directory (wall seconds, sender start to both sides' exit);
  dry-run  `send --dry-run` of the same, unchanged tree against that copy (the new build reads
           and compares every file's attribute there; the old one does not).
Before every run: dirty pages written back (sync), the source read once (warm), and the
previous destination removed. Medians over the rounds. Take the bench lock around it.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time


def make_tree(src, n):
    if (src / ".done").exists():
        return
    shutil.rmtree(src, ignore_errors=True)
    for i in range(n):
        d = src / f"d{i % 100:02d}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"f{i:06d}"
        p.write_bytes(os.urandom(1024))
        os.chown(p, 1, 1)
        os.setxattr(p, "user.tag", os.urandom(16))
    (src / ".done").write_bytes(b"")


def warm(src):
    subprocess.run(["sync"], check=True)
    for dirpath, _, files in os.walk(src):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                fh.read()


def one(binary, src, dest, dry):
    rx = subprocess.Popen([binary, "recv", str(dest), "--token", "bench", "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    url = rx.stdout.readline().strip()
    t0 = time.monotonic()
    s = subprocess.run([binary, "send", *(["--dry-run"] if dry else []), str(src), url, "--token", "bench"],
                       capture_output=True, text=True, timeout=600)
    rx.communicate(timeout=600)
    wall = time.monotonic() - t0
    if s.returncode != 0 or rx.returncode != 0:
        sys.exit(f"{binary}: send {s.returncode} recv {rx.returncode}: {s.stderr[-2000:]}")
    return wall, len(s.stdout.splitlines())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "tools", "sluice"))
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    from pathlib import Path
    data = Path(a.data_dir)
    src = data / "owner-src"
    make_tree(src, a.files)
    builds = {"old": a.old, "new": os.path.abspath(a.new)}
    res = {k: {"send": [], "dry_run": [], "dry_run_lines": []} for k in builds}
    for r in range(a.rounds):
        order = list(builds) if r % 2 == 0 else list(reversed(builds))
        for k in order:
            dest = data / f"owner-dest-{k}"
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir()
            warm(src)
            res[k]["send"].append(one(builds[k], src, dest, False)[0])
            warm(src)
            w, lines = one(builds[k], src, dest, True)
            res[k]["dry_run"].append(w)
            res[k]["dry_run_lines"].append(lines)
            shutil.rmtree(dest)
    out = {"command": " ".join(sys.argv), "files": a.files, "runs": res,
           "median": {k: {m: statistics.median(v[m]) for m in ("send", "dry_run")} for k, v in res.items()}}
    out["ratio_new_to_old"] = {m: out["median"]["new"][m] / out["median"]["old"][m] for m in ("send", "dry_run")}
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
