#!/usr/bin/env python3
"""Compares a received tree with a data set's manifest: every file present with the same size
and sha256, and nothing else there. Exits 0 when equal, 1 naming the differing files.

  verify.py MANIFEST_JSON ROOT      # ROOT holds SET/... as the generator wrote it
"""
import hashlib
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor

CHUNK = 1 << 20


def digest(path):
    h = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def walk(root, top):
    found = set()
    for d, _, names in os.walk(os.path.join(root, top)):
        for n in names:
            found.add(os.path.relpath(os.path.join(d, n), root))
    return found


def compare(manifest, root, workers=2, limit=20, every=1):
    """Returns a list of human-readable differences (empty when the trees are equal). every=N:
    every file's presence and size, the content (sha256) of every Nth file in the manifest's
    order only (a full-size set's check inside a bench call's few minutes)."""
    files = manifest["files"]
    problems = []
    want = {rel for rel, _, _ in files}
    for extra in sorted(walk(root, manifest["set"]) - want)[:limit]:
        problems.append(f"unexpected file {extra}")
    to_hash = []
    for i, (rel, size, sha) in enumerate(files):
        path = os.path.join(root, rel)
        try:
            st = os.stat(path)
        except OSError:
            problems.append(f"missing {rel}")
            continue
        if st.st_size != size:
            problems.append(f"size differs {rel}: {st.st_size} != {size}")
            continue
        if i % every == 0:
            to_hash.append((rel, path, sha))
    if len(problems) < limit and to_hash:
        # Large files first so that both workers finish together.
        to_hash.sort(key=lambda t: -os.stat(t[1]).st_size)
        with ProcessPoolExecutor(max_workers=workers) as ex:
            for (rel, _, sha), got in zip(to_hash, ex.map(digest, [t[1] for t in to_hash], chunksize=8)):
                if got != sha:
                    problems.append(f"content differs {rel}: sha256 {got} != {sha}")
    return problems[:limit]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        manifest = json.load(f)
    problems = compare(manifest, sys.argv[2])
    for p in problems:
        print(f"verify: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"verify: {manifest['set']}: {manifest['count']} files, {manifest['bytes']} bytes equal",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
