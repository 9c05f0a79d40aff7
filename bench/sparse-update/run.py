#!/usr/bin/env python3
"""Issue 17's data-side benchmarks, sluice beside rsync in the same run, over loopback
(127.0.0.1; rsync as a daemon, the way docs/peers.md runs it).

usage: run.py sparse|update|minor DATA_DIR [--rounds N] [--out FILE.json]

sparse: a 4 GiB file holding 16 MiB of data (16 extents of 1 MiB, spread out), sent into an
empty directory by `sluice send` and by `rsync -a -S --whole-file` (rounds alternate their
order). Reported per tool: wall seconds from the sender's start to both sides' exit, bytes
allocated at the receiver (st_blocks * 512), and whether the received bytes equal the source
(cmp). Medians over the rounds. Take the bench lock (/work/brief/bin/bench-lock) around it.

update: a 4 GiB file of random data. Each round: a full `sluice send` into an empty directory
(timed), then three updates, each after 1% of the file's 8 MiB blocks (5 of 512, at random) were
rewritten in the source: `sluice send` with the receiver's block-sums cache (first, right after
the full send, whose receiver stored the sums), then in alternating order `sluice send` with
`sluice recv --no-sums-cache` (the receiver hashes its old version, as before session 14) and
`rsync -a --no-whole-file` (its delta transfer). Each update starts from a destination equal to
the source but for those 5 blocks. Needs ~12 GiB of disk (--src elsewhere and --rsync-inplace:
~4 GiB). DATA_DIR's file system decides how the receiver keeps the unchanged blocks: a reflink
on XFS or btrfs, a copy on ext4 (the receiver's `fallbacks` in the output say which).
  --src DIR          where the 4 GiB source file lives (default DATA_DIR/update-src)
  --rsync-inplace    rsync also with --inplace: it rewrites the changed blocks in place instead
                     of writing a whole new copy (less work for rsync; needs no second 4 GiB)
  --reflink-source   the updates' source is a reflink copy (cp --reflink) of the full send's result
                     on DATA_DIR (XFS, btrfs), made after the full send: the full send reads --src
                     (e.g. tmpfs), the updates a file of the same file system kind as a user's,
                     and the disk holds one 4 GiB copy, not two
  --net 1gbit        both tools between two network namespaces joined by a veth pair with a
                     1 Gbit/s tbf on each end (bench/testbed/netns.sh), instead of loopback

minor: the WDT report's "minor" set at --scale (default 1/32: ~3,200 files of 1-400 KiB) from
bench/datasets/gen.py, first copied whole; then per round, twice: 1% of the files (--fraction;
0 for a no-change update) get 4 KiB rewritten and their mtime moved on by at least a second
(so a quick check by size and whole seconds sees each), and the destination is brought up to date by `sluice send` and by `rsync -a` (delta
transfer, the default to a daemon), alternating order. --old BIN adds a third tool, "sluice
update (old)": the same update by another sluice build (both of its sides), in the same
rotation, for a before/after beside rsync in one run. At full size (--scale 1, ~100k files, ~21 GB,
as much again for the copy): --keep-dest keeps DATA_DIR/minor-dest between calls (`--rounds 0
--keep-dest` makes only the first copy, outside the bench lock), and --check changed compares
each result by the changed files' bytes and the whole tree's listing instead of diff -rq, which
reads ~42 GB per round; run `diff -rq` once by hand after the last call. --rsync-also=FLAGS adds
`rsync FLAGS` to the rotation (e.g. --rsync-also=-aHAXS: the issue's peer, which lists xattrs and
ACLs as sluice does as root; `rsync -a` does not). --sluice-also=FLAGS adds "sluice update FLAGS":
the same build's sender with these flags (e.g. --sluice-also="--no-xattrs --no-acls
--no-hard-links": what `rsync -a` keeps, owners, groups, modes, times, symlinks and specials, and
no more), so both fidelities are timed in one rotation beside both rsyncs. Before the first timed
update both trees are listed once (untimed), so no tool pays for reading their inodes back.

Every side (sluice's sender and receiver, rsync's client and daemon) starts in a session of its
own (setsid): with autogroups on (this VM), processes of one session share one group's CPU
weight against the rest of the machine, whatever their thread count.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLUICE = os.environ.get("SLUICE_BIN", os.path.join(ROOT, "build", "tools", "sluice"))
MiB, GiB = 1 << 20, 1 << 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_sparse(path, size, extents, seed):
    """`size` bytes with random data at `extents` [(offset, length)], holes elsewhere."""
    import random
    rng = random.Random(seed)
    with open(path, "wb") as f:
        f.truncate(size)
        for off, n in extents:
            f.seek(off)
            f.write(rng.randbytes(n))
    os.sync()


def read_all(path):
    with open(path, "rb") as f:
        while f.read(8 * MiB):
            pass


class RsyncDaemon:
    def __init__(self, root, net=None):
        self.net = net or LOOPBACK
        self.port = free_port()
        self.conf = os.path.join(root, "rsyncd.conf")
        with open(self.conf, "w") as f:
            f.write(f"use chroot = false\nuid = root\ngid = root\n[m]\npath = {root}\nread only = false\n")
        self.proc = subprocess.Popen(self.net.wrap("rcv", ["rsync", "--daemon", "--no-detach", f"--config={self.conf}",
                                                           f"--port={self.port}", f"--address={self.net.ip}"]),
                                     stderr=subprocess.PIPE, env=NS_ENV, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            probe = self.net.wrap("snd", [sys.executable, "-c", "import socket,sys; socket.create_connection((sys.argv[1], "
                                          "int(sys.argv[2])), timeout=1).close()", self.net.ip, str(self.port)])
            if subprocess.run(probe, env=NS_ENV, capture_output=True).returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("rsync daemon did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


NETNS = os.path.join(ROOT, "bench", "testbed", "netns.sh")
NS_ENV = dict(os.environ, SB_NS_SND="sl17-bench-snd", SB_NS_RCV="sl17-bench-rcv", SB_IP_SND="10.217.7.1",
              SB_IP_RCV="10.217.7.2")


class Net:
    """Where the two sides run: loopback, or the two namespaces of bench/testbed/netns.sh."""

    def __init__(self, rate=None):
        self.rate = rate
        self.ip = NS_ENV["SB_IP_RCV"] if rate else "127.0.0.1"
        if rate:
            subprocess.run([NETNS, "up", rate], env=NS_ENV, check=True, capture_output=True)

    def wrap(self, side, cmd):
        return [NETNS, "exec", side, *cmd] if self.rate else cmd

    def down(self):
        if self.rate:
            subprocess.run([NETNS, "down"], env=NS_ENV, capture_output=True)


LOOPBACK = Net()


def sluice_run(src, dest, send_args=(), recv_args=(), binary=None, net=LOOPBACK):
    """One `sluice send SRC` into DEST: (seconds, sender stats, receiver stats)."""
    port = free_port()
    binary = binary or SLUICE
    rx = subprocess.Popen(net.wrap("rcv", [binary, "recv", dest, "--bind", net.ip, "--port", str(port), "--token", "b",
                                           "--json", *recv_args]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=NS_ENV, start_new_session=True)
    url = rx.stdout.readline().strip()
    t0 = time.monotonic()
    tx = subprocess.run(net.wrap("snd", [binary, "send", src, url, "--json", *send_args]), capture_output=True, text=True,
                        timeout=600, env=NS_ENV, start_new_session=True)
    out, err = rx.communicate(timeout=120)
    secs = time.monotonic() - t0
    if tx.returncode or rx.returncode:
        raise RuntimeError(f"sluice: send {tx.returncode} {tx.stderr.strip()}; recv {rx.returncode} {err.strip()}")
    return secs, json.loads(tx.stdout.splitlines()[-1]), json.loads(out.splitlines()[-1])


def rsync_run(daemon, src, rel_dest, *args):
    t0 = time.monotonic()
    r = subprocess.run(daemon.net.wrap("snd", ["rsync", *args, src, f"rsync://{daemon.net.ip}:{daemon.port}/m/{rel_dest}/"]),
                       capture_output=True, text=True, timeout=900, env=NS_ENV, start_new_session=True)
    secs = time.monotonic() - t0
    if r.returncode:
        raise RuntimeError(f"rsync {args}: exit {r.returncode}: {r.stderr.strip()}")
    return secs


def same_bytes(a, b):
    return subprocess.run(["cmp", "-s", a, b]).returncode == 0


def bench_sparse(data, rounds):
    src_dir = os.path.join(data, "sparse-src")
    os.makedirs(src_dir, exist_ok=True)
    src = os.path.join(src_dir, "vm.img")
    extents = [(k * 256 * MiB + 12 * MiB, MiB) for k in range(16)]
    if not os.path.exists(src) or os.path.getsize(src) != 4 * GiB:
        make_sparse(src, 4 * GiB, extents, 17)
    dest_root = os.path.join(data, "sparse-dest")
    daemon = RsyncDaemon(data)
    rows = {"sluice": [], "rsync -a -S --whole-file": []}
    try:
        for r in range(rounds):
            order = list(rows) if r % 2 == 0 else list(reversed(rows))
            for tool in order:
                shutil.rmtree(dest_root, ignore_errors=True)
                os.makedirs(dest_root)
                read_all(src)
                if tool == "sluice":
                    secs, s, _ = sluice_run(src, dest_root)
                    sent = s["bytes_sent"]
                else:
                    secs = rsync_run(daemon, src, "sparse-dest", "-a", "-S", "--whole-file")
                    sent = None
                got = os.path.join(dest_root, "vm.img")
                rows[tool].append({"seconds": secs, "allocated": os.stat(got).st_blocks * 512,
                                   "equal": same_bytes(src, got), "bytes_sent": sent})
    finally:
        daemon.stop()
        shutil.rmtree(dest_root, ignore_errors=True)
    return summarize(rows, {"file": "4 GiB, 16 x 1 MiB of data", "src_allocated": os.stat(src).st_blocks * 512})


def rewrite_blocks(path, count, block, seed):
    import random
    rng = random.Random(seed)
    size = os.path.getsize(path)
    picks = rng.sample(range(size // block), count)
    with open(path, "r+b") as f:
        for b in picks:
            f.seek(b * block)
            f.write(rng.randbytes(block))
    return picks


def bench_update(data, rounds, src_dir=None, rsync_inplace=False, rate=None, reflink_source=False):
    src_dir = src_dir or os.path.join(data, "update-src")
    os.makedirs(src_dir, exist_ok=True)
    full_src = src = os.path.join(src_dir, "big.bin")
    if not os.path.exists(src) or os.path.getsize(src) != 4 * GiB:
        subprocess.run(["dd", "if=/dev/urandom", f"of={src}", "bs=8M", "count=512", "status=none"], check=True)
    dest_root = os.path.join(data, "update-dest")
    cache = os.path.join(data, "sums-cache")
    reflinked = os.path.join(data, "update-src-reflink")
    net = Net(rate)
    daemon = RsyncDaemon(data, net)
    rsync_args = ["-a", "--no-whole-file"] + (["--inplace"] if rsync_inplace else [])
    rows = {"sluice full send": [], "sluice update": [], "sluice update (no cache)": [], "rsync " + " ".join(rsync_args[1:]): []}
    rsync_name = list(rows)[-1]
    # A new seed per run: the source file is kept between runs, and blocks rewritten with a seed
    # an earlier run used would rewrite the same bytes (no change to send).
    seed = first_seed = int(time.time())
    try:
        for r in range(rounds):
            shutil.rmtree(dest_root, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(reflinked, ignore_errors=True)
            os.makedirs(dest_root)
            read_all(full_src)
            secs, s, rx = sluice_run(full_src, dest_root, recv_args=("--sums-cache", cache), net=net)
            rows["sluice full send"].append({"seconds": secs, "bytes_sent": s["bytes_sent"],
                                             "sums_stored": rx.get("files_sums_stored")})
            if reflink_source:
                os.makedirs(reflinked)
                src = os.path.join(reflinked, "big.bin")
                subprocess.run(["cp", "--reflink=always", "-p", os.path.join(dest_root, "big.bin"), src], check=True)
            # The cached update right after the send that stored the sums; the other two after it,
            # alternating (each replaces the file, so the entry no longer fits it afterwards).
            order = ["sluice update (no cache)", rsync_name]
            if r % 2:
                order.reverse()
            for tool in ["sluice update"] + order:
                seed += 1
                rewrite_blocks(src, 5, 8 * MiB, seed)
                read_all(src)
                got = os.path.join(dest_root, "big.bin")
                read_all(got)
                row = {}
                if tool.startswith("sluice"):
                    cache_args = ("--no-sums-cache",) if tool.endswith("(no cache)") else ("--sums-cache", cache)
                    secs, s, rx = sluice_run(src, dest_root, recv_args=cache_args, net=net)
                    row = {"bytes_sent": s["bytes_sent"], "fallbacks": rx.get("fallbacks", []),
                           "sums_cached": rx.get("files_sums_cached"), "sums_hashed": rx.get("files_sums_hashed"),
                           "sender_seconds": s.get("seconds"), "receiver_seconds": rx.get("seconds")}
                else:
                    secs = rsync_run(daemon, src, "update-dest", *rsync_args)
                row.update(seconds=secs, equal=same_bytes(src, got))
                rows[tool].append(row)
    finally:
        daemon.stop()
        net.down()
        shutil.rmtree(dest_root, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(reflinked, ignore_errors=True)
    res = summarize(rows, {"file": "4 GiB, 5 of 512 8 MiB blocks rewritten per update", "net": rate or "loopback",
                           "full send from": src_dir, "updates from": reflinked if reflink_source else src_dir,
                           "rsync": rsync_args, "first_seed": first_seed})
    for tool in ("sluice update", "sluice update (no cache)"):
        res["tools"][tool]["sums_cached"] = [x.get("sums_cached") for x in rows[tool]]
        res["tools"][tool]["sums_hashed"] = [x.get("sums_hashed") for x in rows[tool]]
    med = {t: v["median_seconds"] for t, v in res["tools"].items()}
    res["ratios"] = {"full send / update": med["sluice full send"] / med["sluice update"],
                     "rsync / update": med[rsync_name] / med["sluice update"],
                     "update (no cache) / update": med["sluice update (no cache)"] / med["sluice update"]}
    return res


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
                    flags = sluice_also.split() if sluice_also and tool == "sluice update " + sluice_also else ()
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


def loadavg():
    """The 1, 5 and 15-minute load averages (a call's figures are read beside them)."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def summarize(rows, about):
    out = {"about": about, "tools": {}}
    for tool, runs in rows.items():
        out["tools"][tool] = {"median_seconds": statistics.median(x["seconds"] for x in runs),
                              "seconds": [round(x["seconds"], 3) for x in runs],
                              "allocated": [x.get("allocated") for x in runs],
                              "equal": all(x.get("equal", True) for x in runs),
                              "bytes_sent": [x.get("bytes_sent") for x in runs],
                              "fallbacks": [x["fallbacks"] for x in runs if x.get("fallbacks") is not None]}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["sparse", "update", "minor"])
    ap.add_argument("--scale", default="1/32")
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--old", help="minor: another sluice binary, run as a third tool")
    ap.add_argument("--fraction", type=float, default=0.01,
                    help="minor: the fraction of files rewritten before each update (0: none, a no-change update)")
    ap.add_argument("--src", help="update: the directory of the 4 GiB source file")
    ap.add_argument("--rsync-inplace", action="store_true", help="update: rsync with --inplace")
    ap.add_argument("--reflink-source", action="store_true", help="update: update from a reflink of the full send's result")
    ap.add_argument("--net", choices=["1gbit"], help="update: between two namespaces through tbf at this rate")
    ap.add_argument("--rsync-also", metavar="FLAGS",
                    help="minor: another rsync in the same rotation, with these flags (e.g. -aHAXS: hard links, ACLs, "
                         "xattrs, sparse files, what sluice keeps by default as root)")
    ap.add_argument("--sluice-also", metavar="FLAGS",
                    help="minor: the same sluice with these sender flags as another tool in the same rotation (e.g. "
                         "\"--no-xattrs --no-acls --no-hard-links\": what rsync -a keeps)")
    ap.add_argument("--keep-dest", action="store_true",
                    help="minor: keep DATA/minor-dest between calls (copied whole only when absent)")
    ap.add_argument("--check", choices=["full", "changed"], default="full",
                    help="minor: compare each result by diff -rq (full) or the changed files' bytes and the "
                         "tree's listing (changed; for the full-size set)")
    a = ap.parse_args()
    if a.what == "sparse":
        res = bench_sparse(a.data, a.rounds)
    elif a.what == "update":
        res = bench_update(a.data, a.rounds, a.src, a.rsync_inplace, a.net, a.reflink_source)
    else:
        res = bench_minor(a.data, a.rounds, a.scale, a.old, a.fraction, a.keep_dest, a.check, a.rsync_also,
                          a.sluice_also)
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
