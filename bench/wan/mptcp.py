#!/usr/bin/env python3
"""Issue 16: sluice --mptcp over two paths against the same over one, in the same run.

Two namespaces joined by two veth pairs (mptcp_bed.py), each path capped by a tbf of --rate
Mbit/s on the sender's side. A file in the page cache goes from A to B (the receiver discards
it: --sink null, so the disk is not what is measured). "two": B announces its path-2 address,
every connection gets a second subflow. "one": no announcement, every connection stays on
path 1 (still --mptcp, so only the paths differ). The two alternate, --runs times each; the
row is each run's goodput (bytes / sender seconds) and the medians' ratio.

    bench-lock python3 bench/wan/mptcp.py --rate 200 --size 512M --runs 3 --out /work/data/h16e/mptcp.jsonl
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mptcp_bed  # noqa: E402

HERE = Path(__file__).resolve().parent
PORT = 7162
TOKEN = "mptcpbench"


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def one_run(bed, sluice, src, streams, deadline_s):
    # No --bind: a listener bound to path 1's address refuses the subflows that join on the
    # announced path-2 address (the first run's "two" had no second subflow, 1.0x).
    recv = bed.popen("b", [sluice, "recv", str(Path(src).parent), "--sink", "null", "--host", bed.addr("b", 1), "--port", PORT, "--mptcp",
                           "--token", TOKEN, "--no-encrypt", "--json"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if not recv.stdout.readline().startswith("sluice://"):
            raise RuntimeError("receiver did not start: " + recv.stderr.read())
        send = bed.ex("a", [sluice, "send", "--mptcp", "--streams", streams, "--no-encrypt", "--json",
                            "--to", f"{bed.addr('b', 1)}:{PORT}", "--token", TOKEN, src], timeout=deadline_s)
        recv.wait(timeout=deadline_s)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    s = json.loads(send.stdout.strip().splitlines()[-1])
    return {"mbit_s": s["bytes_sent"] * 8 / s["seconds"] / 1e6, "seconds": s["seconds"], "mptcp": s["mptcp"],
            "subflows": [c["subflows"] for c in s["mptcp_connections"]], "bytes_retrans": s["bytes_retrans"],
            # Per data stream, summed over its subflows (MPTCP_TCPINFO) since h16f; and what
            # --streams auto chose from them.
            "tcp_subflows": [t.get("subflows", 0) for t in s["tcp_streams"]],
            "tcp_bytes_sent": sum(t["bytes_sent"] for t in s["tcp_streams"]),
            "streams_used": s["streams_used"], "streams_choice": s["streams_choice"],
            "idle_timeout_ms": s.get("idle_timeout_ms"), "control_rtt_us": s.get("control_rtt_us")}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=200, help="tbf cap of each path, Mbit/s")
    ap.add_argument("--size", default="512M")
    ap.add_argument("--streams", default="4")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--deadline", type=float, default=120, help="seconds one transfer may take")
    ap.add_argument("--out", required=True, help="JSON lines, one per transfer and one summary")
    ap.add_argument("--sluice", default=str(HERE.parents[1] / "build" / "tools" / "sluice"))
    a = ap.parse_args(argv)
    why = mptcp_bed.mptcp_unavailable()
    if why:
        sys.exit(f"mptcp bench: {why}")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / "mptcp-src.bin"
    size = parse_size(a.size)
    if not src.exists() or src.stat().st_size != size:
        with open(src, "wb") as f:
            for _ in range(size >> 20):
                f.write(os.urandom(1 << 20))
    subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
    rows = {"one": [], "two": []}
    with mptcp_bed.TwoPaths(prefix="slmpb", rate_mbit=a.rate) as bed, open(out, "a") as log:
        for run in range(a.runs):
            for paths in ("two", "one"):
                (bed.two_paths if paths == "two" else bed.single_path)()
                r = one_run(bed, a.sluice, src, a.streams, a.deadline)
                r.update(paths=paths, run=run, rate_mbit=a.rate, size=size, streams=a.streams)
                rows[paths].append(r["mbit_s"])
                log.write(json.dumps(r) + "\n")
                print(json.dumps(r), flush=True)
        summary = {"summary": True, "rate_mbit": a.rate, "size": size, "streams": a.streams,
                   "median_two_mbit_s": statistics.median(rows["two"]), "median_one_mbit_s": statistics.median(rows["one"])}
        summary["ratio"] = summary["median_two_mbit_s"] / summary["median_one_mbit_s"]
        log.write(json.dumps(summary) + "\n")
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
