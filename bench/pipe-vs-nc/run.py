#!/usr/bin/env python3
"""Pipe mode on loopback (issue 7): a producer pipe to a consumer pipe,
   dd if=FILE bs=1M | sluice send - URL      ->  sluice recv --stdout | dd of=/dev/null bs=1M
   dd if=FILE bs=1M | nc -N 127.0.0.1 PORT   ->  nc -l PORT | dd of=/dev/null bs=1M
FILE is in the page cache. Rounds alternate the order; wall time runs from the producer's
start to every process's exit; CPU is the mover processes' own rusage (wait4: sender and
receiver; the dd at each end is the same for both and is reported apart).

usage: run.py [--size 4G] [--rounds 3] [--streams 4] [--sluice PATH] [--out DIR]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "pipebench"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu(ru):
    return ru.ru_utime + ru.ru_stime


def wait_listening(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listening on {port}")


def run_once(tool, file, size, streams, sluice, timeout=600):
    port = free_port()
    if tool == "sluice":
        recv_cmd = [sluice, "recv", "--stdout", str(port), "--bind", "127.0.0.1", "--token", TOKEN]
        send_cmd = [sluice, "send", "-", f"sluice://127.0.0.1:{port}/?token={TOKEN}", "--streams", str(streams)]
    else:
        recv_cmd = ["nc", "-l", "127.0.0.1", str(port)]
        send_cmd = ["nc", "-N", "127.0.0.1", str(port)]
    consumer = subprocess.Popen(["dd", "of=/dev/null", "bs=1M", "status=none"], stdin=subprocess.PIPE)
    rx = subprocess.Popen(recv_cmd, stdout=consumer.stdin, stderr=subprocess.PIPE)
    consumer.stdin.close()
    if tool == "sluice":
        rx.stderr.readline()  # the URL line: listening
    else:
        time.sleep(0.2)  # nc -l gives no sign; a probe connection would be its one client
    t0 = time.monotonic()
    producer = subprocess.Popen(["dd", f"if={file}", "bs=1M", "status=none"], stdout=subprocess.PIPE)
    tx = subprocess.Popen(send_cmd, stdin=producer.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    producer.stdout.close()
    results = {}
    for name, p in (("producer", producer), ("send", tx), ("recv", rx), ("consumer", consumer)):
        _, status, ru = os.wait4(p.pid, 0)
        results[name] = (os.waitstatus_to_exitcode(status), cpu(ru))
    secs = time.monotonic() - t0
    bad = {k: v[0] for k, v in results.items() if v[0] != 0}
    if bad or secs > timeout:
        raise RuntimeError(f"{tool} run failed: {bad} {tx.stderr.read()!r} {rx.stderr.read()!r}")
    return {"seconds": secs, "mb_s": size / secs / 1e6,
            "cpu_send_s_per_gb": results["send"][1] / (size / 1e9), "cpu_recv_s_per_gb": results["recv"][1] / (size / 1e9),
            "cpu_ends_s_per_gb": (results["producer"][1] + results["consumer"][1]) / (size / 1e9)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="4G")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--sluice", default=str(ROOT / "build/tools/sluice"))
    ap.add_argument("--out", default=str(ROOT / "bench/out/pipe-vs-nc"))
    a = ap.parse_args()
    size = int(a.size[:-1]) << {"K": 10, "M": 20, "G": 30}[a.size[-1]] if a.size[-1] in "KMG" else int(a.size)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    file = out / "data.bin"
    if not file.exists() or file.stat().st_size != size:
        subprocess.run(f"head -c {size} /dev/urandom > '{file}'", shell=True, check=True)
    subprocess.run(["cat", str(file)], stdout=subprocess.DEVNULL, check=True)  # into the page cache

    runs = {"sluice": [], "nc": []}
    for r in range(a.rounds):
        order = ["sluice", "nc"] if r % 2 == 0 else ["nc", "sluice"]
        for tool in order:
            res = run_once(tool, file, size, a.streams, a.sluice)
            runs[tool].append(res)
            print(f"round {r + 1} {tool}: {res['mb_s']:.0f} MB/s, CPU s/GB send {res['cpu_send_s_per_gb']:.2f} "
                  f"recv {res['cpu_recv_s_per_gb']:.2f}", flush=True)

    def med(tool, key):
        return statistics.median(x[key] for x in runs[tool])

    nc_mb, nc_cpu = med("nc", "mb_s"), med("nc", "cpu_send_s_per_gb") + med("nc", "cpu_recv_s_per_gb")
    print(f"\n{size / 2**30:.0f} GiB, {a.rounds} rounds, medians; sluice --streams {a.streams}\n")
    print("| tool | MB/s | x nc | CPU s/GB send | CPU s/GB recv | CPU s/GB both | CPU vs nc | dd ends CPU s/GB |")
    print("|---|---|---|---|---|---|---|---|")
    for tool in ("sluice", "nc"):
        both = med(tool, "cpu_send_s_per_gb") + med(tool, "cpu_recv_s_per_gb")
        print(f"| {tool} | {med(tool, 'mb_s'):.0f} | {med(tool, 'mb_s') / nc_mb:.2f} | {med(tool, 'cpu_send_s_per_gb'):.2f} | "
              f"{med(tool, 'cpu_recv_s_per_gb'):.2f} | {both:.2f} | {both / nc_cpu:.2f} | {med(tool, 'cpu_ends_s_per_gb'):.2f} |")
    (out / "results.json").write_text(json.dumps({"size": size, "streams": a.streams, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
