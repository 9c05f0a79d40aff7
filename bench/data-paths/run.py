#!/usr/bin/env python3
"""Every data path measured (issue 4), on loopback, side by side with the peers in one run.

Sections (all by default; pick with --sections):
  goals   the issue's goals, --goal-rounds rounds interleaved: default sender into the discard
          sink vs `iperf3 -Z -F FILE` (1 and default streams); default file-to-file vs nc
  streams default paths file-to-file over stream counts (and block 2M/32M), --goal-rounds rounds
  send    each send path (splice, sendfile, zc, read_send) into the discard sink
          (`sluice recv --sink null`), at each stream count, with `iperf3 -Z -F FILE`,
          `iperf3 -F FILE` and `nc < FILE` into `nc -l > /dev/null` at the same place in the order
  recv    each receive path (direct, recv_write, splice) into a directory on the same disk, from
          the fastest sender of the send section, at each stream count; `nc < FILE` into
          `nc -l > FILE` beside it
  combo   every send path x receive path at the default stream count
  cold    page cache dropped (echo 3 > /proc/sys/vm/drop_caches) before each run: each send path
          into the discard sink, the default file-to-file transfer, and the peers
  memory  peak RSS per side of default file-to-file transfers over streams x block size
  trace   CPU copies per byte per side from `sluice trace` (a separate, smaller transfer per
          configuration: tracing costs CPU, so these runs are not timed)

Each run: wall time from the sender's start to both processes' exit; CPU and peak RSS are
each process's own rusage (wait4), so nothing else on the machine is counted. Rounds alternate
the order. Results: OUT/results.json, OUT/results.md (tables), docs-ready plot OUT/data-paths.png.
Run as root (drop_caches, tracing), holding the bench lock:
  flock /run/sluice-bench.lock python3 bench/data-paths/run.py
"""
# Modules: runner.py (set-up, one timed or traced run, commands), sections.py (one method per
# section), this file (options, the sections in order, results.json, the report).
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from sections import Bench

ROOT = Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="4G", help="file size (default 4G)")
    ap.add_argument("--streams", default="1,2,4,8", help="stream counts (default 1,2,4,8)")
    ap.add_argument("--default-streams", type=int, default=4, help="stream count of combo/cold/trace (default 4)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sections", default="goals,streams,send,recv,combo,cold,memory,trace")
    ap.add_argument("--goal-rounds", type=int, default=3, help="rounds of the goals section (default 3)")
    ap.add_argument("--fast-sender", default="", help="sender of the recv section (default: fastest of the send section)")
    ap.add_argument("--cold-size", default="2G", help="bytes per cold-cache run (default 2G: the disk is slow)")
    ap.add_argument("--memory-size", default="4G")
    ap.add_argument("--memory-streams", default="1,4,8")
    ap.add_argument("--memory-blocks", default="2M,8M,32M")
    ap.add_argument("--trace-size", default="1G")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--sluice", default=str(ROOT / "build/tools/sluice"))
    ap.add_argument("--out", default=str(ROOT / "bench/out/data-paths"))
    a = ap.parse_args()
    a.streams = [int(x) for x in a.streams.split(",")]
    a.memory_streams = [int(x) for x in a.memory_streams.split(",")]
    a.memory_blocks = a.memory_blocks.split(",")
    if os.geteuid() != 0:
        sys.exit("data-paths: run as root (drop_caches, tracing)")
    b = Bench(a)
    b.prepare()
    t0 = time.monotonic()
    sections = a.sections.split(",")
    if "trace" in sections and subprocess.run([b.sluice, "trace", "--help"], capture_output=True).returncode != 0:
        print("data-paths: sluice built without the tracer: trace section skipped", file=sys.stderr)
        sections.remove("trace")
    try:
        for sec in sections:
            getattr(b, "sec_" + sec)()
    finally:
        meta = {"size": b.size, "args": vars(a), "wall_s": time.monotonic() - t0, "kernel": os.uname().release,
                "sluice_version": subprocess.run([b.sluice, "--version"], capture_output=True, text=True).stdout.strip()}
        (b.out / "results.json").write_text(json.dumps({"meta": meta, "results": b.results}, indent=1))
        subprocess.run(["rm", "-rf", str(b.dst)])
    subprocess.run([sys.executable, str(Path(__file__).parent / "report.py"), str(b.out)], check=False)


if __name__ == "__main__":
    main()
