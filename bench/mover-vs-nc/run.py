#!/usr/bin/env python3
"""Loopback, one file in the page cache, received into a file on the same disk: sluice vs
`nc -N < file` into `nc -l > file`, with iperf3 memory-to-memory as the ceiling. Rounds
alternate the tool order (the VM's page allocation is noisy); each run's wall time is from
the sender's start to both processes' exit, and CPU is each process's own rusage (wait4),
sender and receiver, so nothing else on the machine is counted.

usage: run.py [--size 2G] [--rounds 3] [--streams 4] [--sluice PATH] [--out DIR] [--extra SEND_ARGS] [--recv-extra RECV_ARGS]

results.json also records the data path, ring mode, streams, block size and fallbacks each
sluice run reported in its --json stats, and the machine (kernel, uptime, commit).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_of(rusage):
    return rusage.ru_utime + rusage.ru_stime


def run_pair(recv_cmd, send_cmd, ready=None, timeout=300):
    """Starts the receiver, waits until it is ready, times the sender; returns seconds, CPU and
    the last line each side printed on stdout (sluice's --json stats)."""
    rx = subprocess.Popen(recv_cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = ready(rx) if ready else time.sleep(0.3)
    t0 = time.monotonic()
    tx = subprocess.Popen([a.replace("{url}", url or "") for a in send_cmd], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    deadline = t0 + timeout
    _, st_tx, ru_tx = os.wait4(tx.pid, 0)
    _, st_rx, ru_rx = os.wait4(rx.pid, 0)
    secs = time.monotonic() - t0
    if time.monotonic() > deadline or os.waitstatus_to_exitcode(st_tx) or os.waitstatus_to_exitcode(st_rx):
        raise RuntimeError(f"run failed: {send_cmd} / {recv_cmd}: {tx.stderr.read()}")
    last = lambda f: (f.read().strip().splitlines() or [""])[-1]
    return secs, cpu_of(ru_tx), cpu_of(ru_rx), last(tx.stdout), last(rx.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="2G")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--sluice", default=str(ROOT / "build/tools/sluice"))
    ap.add_argument("--out", default=str(ROOT / "bench/out/mover-vs-nc"))
    ap.add_argument("--extra", default="", help="extra arguments for sluice send")
    ap.add_argument("--recv-extra", default="", help="extra arguments for sluice recv")
    a = ap.parse_args()
    size = int(a.size[:-1]) << {"K": 10, "M": 20, "G": 30}[a.size[-1]] if a.size[-1] in "KMG" else int(a.size)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    src_dir = out / "src"
    src_dir.mkdir(exist_ok=True)
    src = src_dir / "payload.bin"
    if not src.exists() or src.stat().st_size != size:
        with open(src, "wb") as f:
            left = size
            while left:
                n = min(left, 64 << 20)
                f.write(os.urandom(n))
                left -= n
    subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=True)  # page cache warm
    dst = out / "dst"

    def clean():
        subprocess.run(["rm", "-rf", str(dst)], check=True)
        dst.mkdir()

    def sluice_run():
        clean()
        port = free_port()
        return run_pair(
            [a.sluice, "recv", str(dst), "--bind", "127.0.0.1", "--port", str(port), "--json", *a.recv_extra.split()],
            [a.sluice, "send", str(src), "{url}", "--streams", str(a.streams), "--json", *a.extra.split()],
            ready=lambda p: p.stdout.readline().strip())

    def nc_run():
        clean()
        port = free_port()
        return run_pair(["sh", "-c", f"exec nc -l -p {port} > {dst}/payload.bin"],
                        ["sh", "-c", f"exec nc -N 127.0.0.1 {port} < {src}"])

    def iperf_run():
        port = free_port()
        return run_pair(["iperf3", "-s", "-1", "-p", str(port)],
                        ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-n", str(size)],
                        ready=lambda p: time.sleep(0.5))

    tools = {"sluice": sluice_run, "nc": nc_run, "iperf3 (memory to memory)": iperf_run}
    results = {k: [] for k in tools}
    order = list(tools)
    for r in range(a.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            secs, ctx, crx, out_tx, out_rx = tools[name]()
            got = (dst / "payload.bin").stat().st_size if (dst / "payload.bin").exists() else None
            if name != "iperf3 (memory to memory)" and got != size:
                raise RuntimeError(f"{name} delivered {got} bytes of {size}")
            run = {"seconds": secs, "cpu_send": ctx, "cpu_recv": crx}
            if name == "sluice":
                # What the run actually used, from each side's --json stats.
                js, jr = json.loads(out_tx), json.loads(out_rx)
                run["sluice"] = {k: js.get(k) for k in ("send_path", "ring_mode", "streams", "block_size", "fallbacks")}
                run["sluice"].update({"recv_path": jr.get("recv_path"), "recv_fallbacks": jr.get("fallbacks")})
            results[name].append(run)
            print(f"round {r + 1} {name}: {size / secs / 1e6:.0f} MB/s, cpu send {ctx:.2f}s recv {crx:.2f}s", file=sys.stderr)
    clean()

    gb = size / 1e9
    rows = {}
    for name, runs in results.items():
        secs = statistics.median(x["seconds"] for x in runs)
        rows[name] = {
            "mb_s": size / secs / 1e6,
            "cpu_s_per_gb_send": statistics.median(x["cpu_send"] for x in runs) / gb,
            "cpu_s_per_gb_recv": statistics.median(x["cpu_recv"] for x in runs) / gb,
            "runs": runs,
        }
        rows[name]["cpu_s_per_gb_total"] = rows[name]["cpu_s_per_gb_send"] + rows[name]["cpu_s_per_gb_recv"]
    nc = rows["nc"]
    lines = ["| tool | MB/s (median) | x nc | CPU s/GB send | CPU s/GB recv | CPU s/GB total | CPU vs nc |", "|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['mb_s']:.0f} | {r['mb_s'] / nc['mb_s']:.2f} | {r['cpu_s_per_gb_send']:.2f} | "
                     f"{r['cpu_s_per_gb_recv']:.2f} | {r['cpu_s_per_gb_total']:.2f} | {r['cpu_s_per_gb_total'] / nc['cpu_s_per_gb_total']:.2f} |")
    used = {json.dumps(r["sluice"], sort_keys=True) for r in results["sluice"]}
    for u in sorted(used):
        u = json.loads(u)
        lines.append("")
        lines.append(f"sluice used: send path {u['send_path']} ({u['ring_mode']}), receive path {u['recv_path']}, "
                     f"{u['streams']} streams, {u['block_size'] >> 20} MiB blocks, fallbacks: "
                     f"{', '.join(u['fallbacks'] + u['recv_fallbacks']) or 'none'}")
    table = "\n".join(lines)
    machine = {"sluice": a.sluice, "kernel": os.uname().release, "uptime_s": float(Path("/proc/uptime").read_text().split()[0]),
               "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip()}
    (out / "results.json").write_text(json.dumps({"size": size, "streams": a.streams, "extra": a.extra, "recv_extra": a.recv_extra,
                                                  "machine": machine, "rows": rows}, indent=1))
    (out / "results.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
