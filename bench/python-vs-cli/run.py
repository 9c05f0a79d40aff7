#!/usr/bin/env python3
"""The Python package against the CLI, moving one file over loopback (issue 7: within 5%).

Each round runs both pairs, alternating which goes first: `sluice recv` + `sluice send` (the
CLI), and a Python receiver process (sluice.Receiver(...).wait()) + a Python sender process
(sluice.send(...) with a progress callable polled every 0.2 s, as a user would have it). Both
pairs are started the same way; a run's wall time is from the sender's spawn to both
processes' exit (so Python's interpreter start counts against it), CPU is each process's own
rusage. The headline figure is the transfer as its caller sees it: the sluice.send() call timed
inside the Python sender (without the interpreter's start) against the whole CLI sender process
(spawn to exit, its own start included). The library's own `seconds` (from the stats of each sender) is reported beside it.
The CLI binary and the Python package are copied first, so a rebuild landing mid-bench does
not change what is measured. Take the bench lock: flock /run/sluice-bench.lock run.py ...

usage: run.py [--size 2G] [--rounds 5] [--streams 4] [--recv-path direct] [--build DIR] [--out DIR]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PY_RECV = """
import json, sys, sluice
rx = sluice.Receiver(sys.argv[1], port=int(sys.argv[2]), bind_address="127.0.0.1",
                     advertise_host="127.0.0.1", recv_path=sys.argv[3])
print(rx.url, flush=True)
print(json.dumps(rx.wait()), flush=True)
"""

PY_SEND = """
import json, sys, time, sluice
calls = []
t0 = time.monotonic()
stats = sluice.send([sys.argv[1]], sys.argv[2], streams=int(sys.argv[3]), progress=calls.append)
stats["call_seconds"] = time.monotonic() - t0
stats["progress_calls"] = len(calls)
print(json.dumps(stats), flush=True)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_of(rusage):
    return rusage.ru_utime + rusage.ru_stime


def run_pair(recv_cmd, send_cmd, env, timeout=600):
    """Starts the receiver, reads its URL, times the sender from spawn to both exits."""
    rx = subprocess.Popen(recv_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    url = rx.stdout.readline().strip()
    if not url.startswith("sluice://"):
        rx.kill()
        raise RuntimeError(f"receiver did not start: {recv_cmd}: {rx.stderr.read()}")
    t0 = time.monotonic()
    tx = subprocess.Popen([a.replace("{url}", url) for a in send_cmd], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env)
    _, st_tx, ru_tx = os.wait4(tx.pid, 0)
    tx_secs = time.monotonic() - t0
    _, st_rx, ru_rx = os.wait4(rx.pid, 0)
    secs = time.monotonic() - t0
    if secs > timeout or os.waitstatus_to_exitcode(st_tx) or os.waitstatus_to_exitcode(st_rx):
        raise RuntimeError(f"run failed: {send_cmd}: {tx.stderr.read()} / {recv_cmd}: {rx.stderr.read()}")
    sent = json.loads(tx.stdout.read().strip().splitlines()[-1])
    # The transfer as its caller sees it: the send() call for Python (measured inside the
    # process, so without the interpreter's start), the whole sender process for the CLI.
    call = sent.get("call_seconds", tx_secs)
    return {"seconds": secs, "call_seconds": call, "lib_seconds": sent["seconds"], "cpu_send": cpu_of(ru_tx),
            "cpu_recv": cpu_of(ru_rx), "progress_calls": sent.get("progress_calls"),
            "fallbacks": sent["fallbacks"]}


def parse_size(text):
    units = {"K": 10, "M": 20, "G": 30}
    return int(text[:-1]) << units[text[-1]] if text[-1] in units else int(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="2G")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--recv-path", default="direct")
    ap.add_argument("--build", default=str(ROOT / "build"), help="meson build dir with tools/sluice and python/sluice")
    ap.add_argument("--out", default=str(ROOT / "bench/out/python-vs-cli"))
    a = ap.parse_args()
    size = parse_size(a.size)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    snap = out / "snapshot"  # what is measured, fixed for the whole run
    shutil.rmtree(snap, ignore_errors=True)
    (snap / "python").mkdir(parents=True)
    shutil.copy2(Path(a.build) / "tools/sluice", snap / "sluice")
    shutil.copytree(Path(a.build) / "python/sluice", snap / "python/sluice",
                    ignore=shutil.ignore_patterns("*.p", "__pycache__"))
    cli = str(snap / "sluice")
    env = dict(os.environ, PYTHONPATH=str(snap / "python"))

    src = out / "src" / "payload.bin"
    src.parent.mkdir(exist_ok=True)
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
        shutil.rmtree(dst, ignore_errors=True)
        dst.mkdir()

    def cli_run():
        clean()
        return run_pair([cli, "recv", str(dst), "--bind", "127.0.0.1", "--port", str(free_port()),
                         "--recv-path", a.recv_path],
                        [cli, "send", str(src), "{url}", "--streams", str(a.streams), "--json"], env)

    def python_run():
        clean()
        return run_pair([sys.executable, "-c", PY_RECV, str(dst), str(free_port()), a.recv_path],
                        [sys.executable, "-c", PY_SEND, str(src), "{url}", str(a.streams)], env)

    pairs = {"CLI": cli_run, "Python": python_run}
    results = {k: [] for k in pairs}
    order = list(pairs)
    for r in range(a.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            run = pairs[name]()
            results[name].append(run)
            print(f"round {r + 1} {name}: {size / run['call_seconds'] / 1e6:.0f} MB/s call, "
                  f"{size / run['seconds'] / 1e6:.0f} MB/s wall, "
                  f"{size / run['lib_seconds'] / 1e6:.0f} MB/s library, cpu send {run['cpu_send']:.2f}s "
                  f"recv {run['cpu_recv']:.2f}s", file=sys.stderr)
    clean()

    gb = size / 1e9
    rows = {}
    for name, runs in results.items():
        rows[name] = {
            "mb_s_call": size / statistics.median(x["call_seconds"] for x in runs) / 1e6,
            "mb_s_wall": size / statistics.median(x["seconds"] for x in runs) / 1e6,
            "mb_s_library": size / statistics.median(x["lib_seconds"] for x in runs) / 1e6,
            "cpu_s_per_gb_send": statistics.median(x["cpu_send"] for x in runs) / gb,
            "cpu_s_per_gb_recv": statistics.median(x["cpu_recv"] for x in runs) / gb,
            "runs": runs,
        }
    c = rows["CLI"]
    lines = ["| pair | MB/s send call (median) | vs CLI | MB/s wall, processes (median) | vs CLI | MB/s library seconds (median) | vs CLI | CPU s/GB send | CPU s/GB recv |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['mb_s_call']:.0f} | {r['mb_s_call'] / c['mb_s_call']:.3f} | "
                     f"{r['mb_s_wall']:.0f} | {r['mb_s_wall'] / c['mb_s_wall']:.3f} | "
                     f"{r['mb_s_library']:.0f} | {r['mb_s_library'] / c['mb_s_library']:.3f} | "
                     f"{r['cpu_s_per_gb_send']:.2f} | {r['cpu_s_per_gb_recv']:.2f} |")
    table = "\n".join(lines)
    (out / "results.json").write_text(json.dumps(
        {"size": size, "streams": a.streams, "recv_path": a.recv_path, "rounds": a.rounds, "rows": rows}, indent=1))
    (out / "results.md").write_text(table + "\n")
    print(table)
    for key, what in (("mb_s_call", "send call"), ("mb_s_wall", "wall, with the interpreter's start")):
        ratio = rows["Python"][key] / c[key]
        print(f"Python / CLI throughput ({what}): {ratio:.3f} ({'within' if ratio >= 0.95 else 'NOT within'} 5%)")


if __name__ == "__main__":
    main()
