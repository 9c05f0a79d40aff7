#!/usr/bin/env python3
"""Generates the WDT test report's four data sets, scaled, deterministic with a seed.

The report (1 Gbit/s, data from /dev/urandom):
  large  16 files of 2 GiB
  small  4,243 files, sizes uniform in 1 KiB..10 MiB
  minor  102,645 files, sizes uniform in 1 KiB..400 KiB
  mixed  small + minor
--scale S keeps the per-file size distributions and scales the bytes: the file counts of
small and minor are multiplied by S (expected bytes scale by S), large keeps 16 files of
2 GiB * S each. The default 1/16 gives large 2 GiB (16 x 128 MiB), small ~1.3 GiB/265 files,
minor ~1.2 GiB/6,415 files, mixed = both.

Content is incompressible pseudo-random: an AES-128-CTR keystream from `openssl enc`
(1-2 GB/s) keyed by sha256(seed, set); each file is the next slice of its set's stream, so
the same seed and scale give byte-identical trees. mixed/ holds hard links to small/ and
minor/ (no extra disk or page cache; each inode appears once inside mixed/).

Layout: OUT/SET/NNN/fNNNNNN.bin (at most 1,000 files per directory) and OUT/manifests/SET.json
with [path, size, sha256] per file, which bench/datasets/verify.py checks a received tree
against. Re-running with the same parameters does nothing (a stamp records them).
"""
import argparse
import fcntl
import fractions
import hashlib
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import time

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
SETS = {
    # name: (file count, size sampler kind, min, max)
    "large": (16, "fixed", 2 * GIB, 2 * GIB),
    "small": (4243, "uniform", 1 * KIB, 10 * MIB),
    "minor": (102645, "uniform", 1 * KIB, 400 * KIB),
}
PER_DIR = 1000
FORMAT = 1  # bump when the layout or content derivation changes


def parse_scale(text):
    f = fractions.Fraction(text)
    if not 0 < f <= 1:
        raise argparse.ArgumentTypeError("scale must be in (0, 1], e.g. 1/16")
    return f


def plan(name, scale, seed):
    """Returns [(relpath, size)] for one set."""
    count, kind, lo, hi = SETS[name]
    rng = random.Random(f"sluice-bench:{seed}:{name}:sizes")
    if kind == "fixed":
        size = max(1, int(lo * scale))
        sizes = [size] * count
    else:
        n = max(1, round(count * scale))
        sizes = [rng.randint(lo, hi) for _ in range(n)]
    return [(f"{i // PER_DIR:03d}/f{i:06d}.bin", s) for i, s in enumerate(sizes)]


def keystream(name, seed, offset=0):
    """The set's keystream from byte `offset` on: AES-CTR's counter block is the 128-bit
    big-endian block number, so a slice starts at counter offset // 16 (its first offset % 16
    bytes are read and dropped by the caller)."""
    key = hashlib.sha256(f"sluice-bench:{seed}:{name}:content".encode()).hexdigest()[:32]
    cmd = ["openssl", "enc", "-aes-128-ctr", "-nosalt", "-K", key, "-iv", f"{offset // 16:032x}", "-in", "/dev/zero"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    try:
        fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
    except OSError:
        pass
    return proc


def fill(pipe, view):
    """Reads exactly len(view) bytes from the keystream pipe."""
    got = 0
    while got < len(view):
        n = pipe.readinto(view[got:])
        if not n:
            raise RuntimeError("openssl keystream ended early")
        got += n


def generate(out, name, scale, seed, jobs=1):
    files = plan(name, scale, seed)
    root = os.path.join(out, name)
    shutil.rmtree(root, ignore_errors=True)
    if jobs <= 1 or len(files) < 2:
        return write_slice(root, name, seed, files, 0)
    # --jobs: contiguous runs of files, each from its own offset in the same keystream, so the
    # tree is byte-identical to one job's (a full-size set is written in 1/jobs of the time on a
    # machine where one openssl + sha256 + write loop is CPU-bound; its disk hold is shorter).
    total = sum(s for _, s in files)
    cuts, acc, k = [0], 0, 1
    for i, (_, size) in enumerate(files):
        acc += size
        if k < jobs and acc >= total * k / jobs:
            cuts.append(i + 1)
            k += 1
    cuts.append(len(files))
    slices = [(files[a:b], sum(s for _, s in files[:a])) for a, b in zip(cuts, cuts[1:]) if b > a]
    with multiprocessing.get_context("fork").Pool(len(slices)) as pool:
        parts = pool.starmap(write_slice, [(root, name, seed, fs, off) for fs, off in slices])
    return [e for part in parts for e in part]


def write_slice(root, name, seed, files, offset):
    """Writes `files` from the set's keystream starting at byte `offset`; returns their entries."""
    proc = keystream(name, seed, offset)
    buf = bytearray(4 * MIB)
    view = memoryview(buf)
    entries = []
    try:
        fill(proc.stdout, view[:offset % 16])
        for rel, size in files:
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            h = hashlib.sha256()
            with open(path, "wb", buffering=0) as f:
                left = size
                while left:
                    want = min(left, len(buf))
                    fill(proc.stdout, view[:want])
                    h.update(view[:want])
                    f.write(view[:want])
                    left -= want
            entries.append([f"{name}/{rel}", size, h.hexdigest()])
    finally:
        proc.kill()
        proc.wait()
    return entries


def link_mixed(out, parts):
    root = os.path.join(out, "mixed")
    shutil.rmtree(root, ignore_errors=True)
    entries = []
    for part in parts:
        for rel, size, digest in part:
            dst = os.path.join(root, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.link(os.path.join(out, rel), dst)
            entries.append([f"mixed/{rel}", size, digest])
    return entries


def write_manifest(out, name, params, entries):
    os.makedirs(os.path.join(out, "manifests"), exist_ok=True)
    doc = dict(params, set=name, count=len(entries), bytes=sum(e[1] for e in entries), files=entries)
    tmp = os.path.join(out, "manifests", f".{name}.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, os.path.join(out, "manifests", f"{name}.json"))
    return doc


def load_manifest(out, name):
    try:
        with open(os.path.join(out, "manifests", f"{name}.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def up_to_date(out, name, params):
    """True when the manifest matches the parameters and every file has its size."""
    doc = load_manifest(out, name)
    if not doc or any(doc.get(k) != v for k, v in params.items()):
        return False
    for rel, size, _ in doc["files"]:
        try:
            if os.stat(os.path.join(out, rel)).st_size != size:
                return False
        except OSError:
            return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory that receives SET/ and manifests/")
    ap.add_argument("--scale", type=parse_scale, default=fractions.Fraction(1, 16),
                    help="fraction of the report's bytes (default 1/16; 1 = full size)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sets", default="large,small,minor,mixed")
    ap.add_argument("--force", action="store_true", help="regenerate even when up to date")
    ap.add_argument("--jobs", type=int, default=1,
                    help="write each set in N slices at once (the same bytes; for full-size sets)")
    a = ap.parse_args()
    wanted = [s for s in a.sets.split(",") if s]
    for s in wanted:
        if s not in SETS and s != "mixed":
            ap.error(f"unknown set {s}")
    params = {"format": FORMAT, "scale": str(a.scale), "seed": a.seed}
    os.makedirs(a.out, exist_ok=True)
    need = set(wanted)
    fresh = set()
    if "mixed" in need:
        need |= {"small", "minor"}
    for name in ["large", "small", "minor"]:
        if name not in need:
            continue
        if not a.force and up_to_date(a.out, name, params):
            print(f"datasets: {name} up to date", file=sys.stderr)
            continue
        t = time.monotonic()
        entries = generate(a.out, name, a.scale, a.seed, a.jobs)
        fresh.add(name)
        doc = write_manifest(a.out, name, params, entries)
        dt = time.monotonic() - t
        print(f"datasets: {name}: {doc['count']} files, {doc['bytes'] / GIB:.2f} GiB in {dt:.1f} s "
              f"({doc['bytes'] / 1e6 / dt:.0f} MB/s)", file=sys.stderr)
    if "mixed" in need:
        mparams = dict(params)
        # mixed/ links to small/ and minor/ inodes: relink whenever either was regenerated.
        if a.force or fresh or not up_to_date(a.out, "mixed", mparams):
            parts = [load_manifest(a.out, n)["files"] for n in ("small", "minor")]
            doc = write_manifest(a.out, "mixed", mparams, link_mixed(a.out, parts))
            print(f"datasets: mixed: {doc['count']} files, {doc['bytes'] / GIB:.2f} GiB (hard links)",
                  file=sys.stderr)
        else:
            print("datasets: mixed up to date", file=sys.stderr)


if __name__ == "__main__":
    main()
