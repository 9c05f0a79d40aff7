"""run.py minor: the minor set with a fraction of its files changed, sluice beside rsync (see run.py)."""
import os
import shutil
import subprocess
import sys
import time

from common import ROOT, RsyncDaemon, loadavg, same_bytes, sluice_run, rsync_run, summarize


# A rewritten file's new mtime is whole seconds after its old one: rewritten in place at the
# same size within the second of its last sync, a file kept its whole-second mtime and
# rsync's quick check (size and seconds) skipped it (session 14: rsync's results differed
# from the source). Now both tools see every rewritten file changed.
def touch_files(root, fraction, seed):
    import random
    rng = random.Random(seed)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
    picks = rng.sample(files, max(1, int(len(files) * fraction))) if fraction > 0 else []
    for p in picks:
        st = os.stat(p)
        size = st.st_size
        with open(p, "r+b") as f:
            f.seek(rng.randrange(max(1, size - 4096)))
            f.write(rng.randbytes(min(4096, size)))
        mtime_s = max(st.st_mtime_ns // 1_000_000_000, int(time.time())) + 1
        os.utime(p, ns=(time.time_ns(), mtime_s * 1_000_000_000))
    return len(files), picks


def tree_listing(root):
    """{relpath: (kind, size, whole-second mtime)} of every entry under root."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_mode >> 12, st.st_size if name in files else 0, int(st.st_mtime))
    return out


def same_tree(src, dest, changed, check):
    """check "full": diff -rq of the whole tree (reads both trees: minutes at full size).
    check "changed": every changed file's bytes (cmp) and the whole tree's listing (names,
    kinds, sizes, whole-second mtimes); a full diff -rq after the last call (by hand) covers the
    files neither tool should have touched."""
    if check == "full":
        return subprocess.run(["diff", "-rq", src, dest], capture_output=True).returncode == 0
    if tree_listing(src) != tree_listing(dest):
        return False
    return all(same_bytes(p, os.path.join(dest, os.path.relpath(p, src))) for p in changed)


def bench_minor(data, rounds, scale, old=None, fraction=0.01, keep_dest=False, check="full", rsync_also=None,
                sluice_also=None):
    sets = os.path.join(data, "sets")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "datasets", "gen.py"), "--out", sets, "--scale", scale,
                    "--sets", "minor"], check=True)
    src = os.path.join(sets, "minor")
    dest_root = os.path.join(data, "minor-dest")
    # --keep-dest: the destination stays between calls (at full size its first copy takes
    # ~20 GB and a minute or more: made once, outside the bench lock); each update brings it up to
    # date again, so a call starts from a destination equal to the source.
    first_copy = not (keep_dest and os.path.isdir(os.path.join(dest_root, "minor")))
    if first_copy:
        shutil.rmtree(dest_root, ignore_errors=True)
        os.makedirs(dest_root)
    daemon = RsyncDaemon(data)
    rows = {"sluice update": [], "rsync -a": []}
    if old:
        rows["sluice update (old)"] = []
    if rsync_also:
        rows["rsync " + rsync_also] = []
    if sluice_also:
        rows["sluice update " + sluice_also] = []
        if old:  # the other build at the same fidelity too: a before/after of each sluice row
            rows["sluice update " + sluice_also + " (old)"] = []
    seed = 200 if not keep_dest else int(time.time())
    n = changed = 0
    load_start = loadavg()
    try:
        if first_copy:
            sluice_run(src, dest_root)  # the first, whole copy (not timed)
        if rounds == 0:  # --rounds 0 --keep-dest: only the first copy
            return {"about": {"set": f"minor at scale {scale}", "first_copy": first_copy}}
        # Both trees' inodes read once, untimed: after minutes idle (waiting for the bench
        # lock, others streaming GBs through the page cache) the first timed tool read them back
        # from disk and paid for every tool (h17r: 2.25 s against 0.63-0.68 s after it).
        tree_listing(src)
        tree_listing(os.path.join(dest_root, "minor"))
        for r in range(rounds):
            order = list(rows) if r % 2 == 0 else list(reversed(rows))
            for tool in order:
                seed += 1
                n, picks = touch_files(src, fraction, seed)
                changed = len(picks)
                if tool.startswith("sluice update"):
                    flags = sluice_also.split() if sluice_also and tool.startswith("sluice update " + sluice_also) else ()
                    secs, s, _ = sluice_run(src, dest_root, send_args=flags, binary=old if tool.endswith("(old)") else None)
                    sent = s["bytes_sent"]
                else:
                    secs = rsync_run(daemon, src, "minor-dest", *tool.split()[1:])
                    sent = None
                equal = same_tree(src, os.path.join(dest_root, "minor"), picks, check)
                rows[tool].append({"seconds": secs, "bytes_sent": sent, "equal": equal})
    finally:
        daemon.stop()
        if not keep_dest:
            shutil.rmtree(dest_root, ignore_errors=True)
    return summarize(rows, {"set": f"minor at scale {scale}", "files": n, "changed_per_update": changed,
                            "check": check, "load_start": load_start, "load_end": loadavg()})
