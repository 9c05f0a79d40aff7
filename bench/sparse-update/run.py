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
no more), so both fidelities are timed in one rotation beside both rsyncs; with --old too, the
other build runs at that fidelity as well ("sluice update FLAGS (old)"). Before the first timed
update both trees are listed once (untimed), so no tool pays for reading their inodes back.

Every side (sluice's sender and receiver, rsync's client and daemon) starts in a session of its
own (setsid): with autogroups on (this VM), processes of one session share one group's CPU
weight against the rest of the machine, whatever their thread count.
"""
import argparse
import json
import sys

from minor_bench import bench_minor
from sparse_bench import bench_sparse
from update_bench import bench_update


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
