#!/usr/bin/env python3
"""How long a healthy connection on a lossy link stays silent (issue 16: the deadline factor).

sluice fails a transfer when its peer is silent for its idle deadline (core/io/rtt_deadlines.hpp),
and the peer speaks at least every 0.5 s (WORKING). On a lossy link a message whose segment is
lost arrives only after retransmissions: a tail loss probe after ~2 RTT, then retransmission
timeouts that double (RTO >= RTT + 200 ms on Linux). So the longest silence of a live
connection is set by the longest run of losses of one segment, in RTOs, not in round trips.

This measures it through the emulator (wan.py, random loss in both directions): --conns TCP
connections from A to B, each writing a 16-byte message every 0.5 s for --seconds; the receiver
in B notes, per connection, every silence (time between two reads with nothing in between) and
prints their distribution in ms and in round trips, with the sender's RTO from ss.

    /work/brief/bin/bench-lock python3 bench/wan/silence.py --rtts 20,80 --loss 14 --seconds 90 \
        --out /work/data/h16g/silence.jsonl
"""
import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wan  # noqa: E402

PORT = 7116

# The two ends, run in the namespaces by `python3 -c`. Bounded: every wait has a deadline.
RECEIVER = r"""
import json, selectors, socket, sys, time
n, seconds, port = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0", port)); ls.listen(n); ls.settimeout(30)
sel = selectors.DefaultSelector(); last = {}; gaps = {}
for i in range(n):
    c, _ = ls.accept(); c.setblocking(False); sel.register(c, selectors.EVENT_READ, i)
print("ready", flush=True)
end = time.monotonic() + seconds + 60  # room for the last retransmissions
open_ = n
while open_ and time.monotonic() < end:
    for key, _ in sel.select(timeout=1):
        now = time.monotonic()
        try:
            data = key.fileobj.recv(65536)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            data = b""
        if not data:
            sel.unregister(key.fileobj); key.fileobj.close(); open_ -= 1; continue
        i = key.data
        if i in last:
            gaps.setdefault(i, []).append(now - last[i])
        last[i] = now
print(json.dumps({"gaps_s": [g for v in gaps.values() for g in v], "open_at_end": open_}), flush=True)
"""

SENDER = r"""
import socket, sys, time
n, seconds, host, port = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
conns = []
for i in range(n):
    c = socket.create_connection((host, port), timeout=30)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1); conns.append(c)
t0 = time.monotonic(); k = 0
while time.monotonic() - t0 < seconds:
    for c in conns:
        c.send(b"WORKING.........")  # 16 bytes, never more than the send buffer holds
    k += 1
    time.sleep(max(0, t0 + 0.5 * k - time.monotonic()))
print("sent", k, flush=True)
time.sleep(float(sys.argv[5]))  # let the last messages' retransmissions arrive
for c in conns: c.close()
"""


def measure(rtt, loss, conns, seconds, log):
    w = wan.Wan(prefix="slsil", delay_ab=rtt / 2, delay_ba=rtt / 2, loss_ab=loss / 100, loss_ba=loss / 100,
                rate_mbit=100, log=log)
    with w:
        ping = w.ping_rtt_ms()
        rx = w.popen("b", ["python3", "-c", RECEIVER, conns, seconds, PORT], stdout=wan.subprocess.PIPE, text=True)
        time.sleep(0.5)
        tx = w.popen("a", ["python3", "-c", SENDER, conns, seconds, wan.ADDR_B, PORT, 15],
                     stdout=wan.subprocess.PIPE, text=True)
        time.sleep(seconds / 2)
        ss = w.ex("a", ["ss", "-Htin", "state", "established", f"( dport = :{PORT} )"], check=False).stdout
        rtos = sorted(float(x) for x in re.findall(r"\brto:([\d.]+)", ss))
        out, _ = rx.communicate(timeout=seconds + 120)
        tx.communicate(timeout=60)
        counted = w.counters()
    res = json.loads(out.strip().splitlines()[-1])
    gaps = sorted(res.pop("gaps_s"))
    rtt_s = rtt / 1000
    row = {"rtt_ms": rtt, "loss_pct": loss, "conns": conns, "seconds": seconds, "ping_ms": ping,
           "messages": len(gaps) + conns, "open_at_end": res["open_at_end"],
           "rto_ms_median": rtos[len(rtos) // 2] if rtos else None,
           "line_lost_ab": counted.get("ab", {}).get("lost"), "line_in_ab": counted.get("ab", {}).get("rx"),
           "max_silence_s": gaps[-1] if gaps else None,
           "max_silence_rtts": gaps[-1] / rtt_s if gaps else None,
           "top10_s": gaps[-10:],
           "over_rtts": {k: sum(g > k * rtt_s for g in gaps) for k in (8, 16, 32, 64, 128, 256)}}
    return row


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rtts", default="20,80")
    ap.add_argument("--loss", type=float, default=14.0, help="random loss in each direction, percent")
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    for rtt in (float(x) for x in a.rtts.split(",")):
        row = measure(rtt, a.loss, a.conns, a.seconds, log=lambda *x: print(*x, file=sys.stderr))
        print(json.dumps(row), flush=True)
        with open(a.out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
