#!/usr/bin/env python3
"""Issue 16: what a data stream reset mid-transfer costs. Through the emulator (wan.py), a file
goes from A to B; once one data connection has carried `--kill-after` bytes (its bytes_acked in
`ss`), the sender's end of it is destroyed with `ss -K` in namespace A (the kernel resets it:
the receiver sees a RST, the sender's next write fails). sluice reopens the stream (stream
reconnect) and sends again what the broken connection had not delivered: the row keeps the
sender's bytes_resent_after_break and streams_reopened, and whether the copy is identical.
No proxy: what the receiver's TCP acknowledged is what it keeps (a proxy's buffers would count
as delivered to the sender and be lost with it).

    bench-lock python3 bench/wan/reset.py --rtt 80 --rate 100 --runs 3 --out /work/data/h16d/reset.jsonl
"""
import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wan  # noqa: E402

PORT = 7117


def data_connections(w, port):
    """(local port, bytes_acked) of A's connections to B's port, most acknowledged first."""
    r = w.ex("a", ["ss", "-Htin", "state", "established", f"( dport = :{port} )"], check=False)
    conns = []
    lines = r.stdout.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"\s\S+:(\d+)\s+\S+:" + str(port) + r"\b", line)
        if not m:
            continue
        info = lines[i + 1] if i + 1 < len(lines) else ""
        acked = re.search(r"bytes_acked:(\d+)", line + " " + info)
        conns.append((int(m.group(1)), int(acked.group(1)) if acked else 0))
    return sorted(conns, key=lambda c: -c[1])


def reset_run(w, sluice, src, dest, streams, block, bounded, kill_after, deadline_s=120, extra=()):
    """One transfer with one data connection reset once it carried kill_after bytes. Returns the
    sender's stats plus what was killed; raises RuntimeError if the transfer failed or no
    connection reached kill_after (under load: the deadline is generous, nothing is timed)."""
    recv = w.popen("b", [sluice, "recv", "--bind", wan.ADDR_B, "--port", PORT, "--token", "resettest", "--json",
                         "--no-encrypt", "-v", dest], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    send = None
    try:
        if not recv.stdout.readline().startswith("sluice://"):
            raise RuntimeError("receiver did not start")
        t0 = time.monotonic()
        send = w.popen("a", [sluice, "send", "--streams", streams, "--block-size", block, "--json", "-v", "--no-encrypt",
                             *(["--bounded-resend"] if bounded else []), *extra, "--to", f"{wan.ADDR_B}:{PORT}",
                             "--token", "resettest", src], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed = None
        while killed is None and send.poll() is None and time.monotonic() - t0 < deadline_s:
            conns = data_connections(w, PORT)
            if conns and conns[0][1] >= kill_after:
                killed = conns[0]
                w.ex("a", ["ss", "-K", "dst", wan.ADDR_B, "dport", "=", str(PORT), "sport", "=", str(killed[0])])
            else:
                time.sleep(0.02)
        out, err = send.communicate(timeout=deadline_s)
        rout, rerr = recv.communicate(timeout=deadline_s)
        if killed is None:
            raise RuntimeError(f"no data connection carried {kill_after} bytes before the transfer ended")
        if send.returncode != 0 or recv.returncode != 0:
            raise RuntimeError(f"send exit {send.returncode}: {err[-400:]}\nrecv exit {recv.returncode}: {rerr[-400:]}")
        s = json.loads(out.strip().splitlines()[-1])
        return {"seconds": s["seconds"], "bytes_sent": s["bytes_sent"], "streams_reopened": s["streams_reopened"],
                "bytes_resent_after_break": s["bytes_resent_after_break"], "killed_port": killed[0],
                "killed_at_acked": killed[1], "goodput_mbit": s["bytes_sent"] * 8 / s["seconds"] / 1e6,
                "reopen_lines": [l for l in err.splitlines() if "reopen" in l or "broke" in l]}
    finally:
        for p in (send, recv):
            if p and p.poll() is None:
                p.kill()
                p.communicate()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rtt", type=float, default=80)
    ap.add_argument("--rate", type=float, default=100, help="tbf Mbit/s")
    ap.add_argument("--streams", default="4")
    ap.add_argument("--block", default="8M")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--kill-after", type=int, default=24 << 20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="default,bounded")
    ap.add_argument("--sluice", default=str(Path(__file__).resolve().parents[2] / "build/tools/sluice"))
    ap.add_argument("--data-dir", default="/work/data/h16d")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    data = Path(a.data_dir)
    src = data / "reset-src.bin"
    subprocess.run(["dd", "if=/dev/urandom", f"of={src}", "bs=1M", f"count={a.size_mib}", "status=none"], check=True)
    w = wan.Wan(prefix="slwanr", delay_ab=a.rtt / 2, delay_ba=a.rtt / 2, rate_mbit=a.rate, log=lambda m: print(m, flush=True))
    try:
        with w, open(a.out, "a") as out:
            for run in range(a.runs):
                for mode in a.modes.split(","):
                    dest = data / f"reset-dest-{mode}-{run}"
                    dest.mkdir(parents=True, exist_ok=True)
                    try:
                        row = reset_run(w, a.sluice, src, dest, a.streams, a.block, mode == "bounded", a.kill_after)
                        row["identical"] = subprocess.run(["cmp", "-s", src, dest / src.name]).returncode == 0
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        row = {"error": str(e)[-600:]}
                    subprocess.run(["rm", "-rf", str(dest)])
                    row.update(mode=mode, run=run, rtt_ms=a.rtt, rate_mbit=a.rate, streams=a.streams, block=a.block,
                               size_mib=a.size_mib, kill_after=a.kill_after)
                    print(json.dumps(row), flush=True)
                    out.write(json.dumps(row) + "\n")
    finally:
        src.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
