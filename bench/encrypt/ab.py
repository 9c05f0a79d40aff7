#!/usr/bin/env python3
"""Issue 18, session 12 (h18f): two short same-run comparisons over loopback, encrypted.

  ab.py small --src DIR --before BIN --after BIN [--rounds 3]
      one tree (the minor set) sent with --encrypt by two sluice builds, alternating: MB/s, the
      sender's own CPU (cpu_user_s + cpu_sys_s of its stats) and the whole machine's busy CPU
      (/proc/stat), per GB. The source is read (warmed) before every run, dst removed, `sync`.
      --perf DIR records each run with `perf record -a -g` (then not a timing).
  ab.py handshakes [--runs 10] [--streams 16]
      one 4 KiB file, token mode (--encrypt) against certificate mode (a self-signed EC P-256
      certificate made here with openssl, the sender pinning it), alternating: seconds per
      transfer (sender start to both exited) and the handshake counts of both sides' stats.

Prints a Markdown table of medians and every run; appends every run to --out (JSON lines)."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from run import busy_seconds, tree_bytes  # run.py, beside this file

ROOT = Path(__file__).resolve().parents[2]
SLUICE = os.environ.get("SB_SLUICE", str(ROOT / "build" / "tools" / "sluice"))


def one(binary, src, dst, recv_args, send_args, perf=None):
    # A fresh dst per run, all removed at the end: ext4 skips recently freed inodes when it
    # allocates one (recently_deleted() reads each candidate's inode table block), and a tree
    # removed just before a run cost the next run's O_TMPFILE creates 15-29% of the machine's
    # samples (perf, 2026-11-25, h18f). Deletions by others on the file system still count.
    dst.mkdir(parents=True)
    subprocess.run(["sync"])
    subprocess.run(f"find {src} -type f -print0 | xargs -0 cat > /dev/null", shell=True, check=True)
    rx = subprocess.Popen([binary, "recv", str(dst), "--bind", "127.0.0.1", "--port", "0", "--token", "ab", "--json"]
                          + recv_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = rx.stdout.readline().strip()
    assert url, rx.stderr.read()
    # perf: the whole machine, call graphs, while this run lasts (a profile, not a timing).
    prof = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "999", "-o", str(perf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL) if perf else None
    c0, t0 = busy_seconds(), time.monotonic()
    tx = subprocess.run([binary, "send", str(src), url, "--json"] + send_args, capture_output=True, text=True, timeout=300)
    out, err = rx.communicate(timeout=120)
    t1, c1 = time.monotonic(), busy_seconds()
    if prof:
        prof.send_signal(2)
        prof.wait(timeout=60)
    if tx.returncode or rx.returncode:
        raise SystemExit(f"sender {tx.returncode} {tx.stderr[-600:]}\nreceiver {rx.returncode} {err[-600:]}")
    s, r = json.loads(tx.stdout.strip().splitlines()[-1]), json.loads(out.strip().splitlines()[-1])
    size = tree_bytes(src)
    assert tree_bytes(dst) == size
    gb = size / 1e9
    return {"seconds": t1 - t0, "mb_s": size / (t1 - t0) / 1e6, "machine_cpu_s_per_gb": (c1 - c0) / gb,
            "sender_cpu_s_per_gb": (s["cpu_user_s"] + s["cpu_sys_s"]) / gb,
            "receiver_cpu_s_per_gb": (r["cpu_user_s"] + r["cpu_sys_s"]) / gb, "send_path": s.get("send_path"),
            "recv_path": r.get("recv_path"), "tls_mode": s.get("tls_mode"),
            "handshakes": {k: (s.get(k), r.get(k)) for k in ("tls_full_handshakes", "tls_resumed_handshakes",
                                                             "tls_psk_handshakes")}}


def table(rows, key_fields):
    print("| variant | " + " | ".join(key_fields) + " | runs |")
    print("|---|" + "---|" * (len(key_fields) + 1))
    for name in dict.fromkeys(r["variant"] for r in rows):
        rs = [r for r in rows if r["variant"] == name]
        meds = [f"{statistics.median(r[k] for r in rs):,.3f}" for k in key_fields]
        runs = ", ".join(f"{r[key_fields[0]]:,.3f}" for r in rs)
        print(f"| {name} | " + " | ".join(meds) + f" | {runs} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["small", "handshakes"])
    ap.add_argument("--src")
    ap.add_argument("--before")
    ap.add_argument("--after", default=SLUICE)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--work", default="/work/data/h18f/ab")
    ap.add_argument("--out", default="/work/data/h18f/ab.jsonl")
    ap.add_argument("--perf", help="small: record each run with perf into this directory (VARIANT-N.data)")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    runs = iter(range(1 << 30))
    fresh = lambda: work / f"dst-{next(runs)}"  # noqa: E731
    if a.what == "small":
        for i in range(a.rounds):
            for name, binary in (("before", a.before), ("after", a.after)):
                perf = Path(a.perf) / f"{name}-{i}.data" if a.perf else None
                rows.append(dict(one(binary, Path(a.src), fresh(), ["--encrypt"], ["--encrypt"], perf), variant=name))
        table(rows, ["mb_s", "sender_cpu_s_per_gb", "receiver_cpu_s_per_gb", "machine_cpu_s_per_gb"])
    else:
        with tempfile.TemporaryDirectory(dir=work) as d:
            d = Path(d)
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                            "-nodes", "-keyout", "k.pem", "-out", "c.pem", "-days", "1", "-subj", "/CN=ab"], cwd=d,
                           check=True, capture_output=True)
            pin = subprocess.run("openssl x509 -in c.pem -pubkey -noout | openssl pkey -pubin -outform der | sha256sum",
                                 shell=True, cwd=d, check=True, capture_output=True, text=True).stdout.split()[0]
            (d / "src").mkdir()
            (d / "src" / "f").write_bytes(os.urandom(4096))
            streams = ["--streams", str(a.streams)]
            variants = (("token (psk)", ["--encrypt"], ["--encrypt"] + streams),
                        ("certificate", ["--cert", str(d / "c.pem"), "--key", str(d / "k.pem")],
                         ["--pin", "sha256:" + pin] + streams))
            for _ in range(a.runs):
                for name, rargs, sargs in variants:
                    rows.append(dict(one(a.after, d / "src", fresh(), rargs, sargs), variant=name))
        table(rows, ["seconds"])
        for name in dict.fromkeys(r["variant"] for r in rows):
            print(f"{name}: handshakes (sender, receiver) {next(r for r in rows if r['variant'] == name)['handshakes']}")
    for p in work.glob("dst-*"):
        shutil.rmtree(p)
    with open(a.out, "a") as f:
        for r in rows:
            f.write(json.dumps(dict(r, what=a.what)) + "\n")


if __name__ == "__main__":
    main()
