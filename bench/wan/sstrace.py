"""Per-stream TCP state sampled from `ss` during a run (issue 16, h16c: why many streams fall off).

A thread samples both ends every `every` seconds, for at most `limit` samples: on the sender
(A) each connection's cwnd, pacing rate, delivery rate, retransmitted segments, bytes in
flight and the time it was held by the receiver's window / its send buffer; on the receiver
(B) each connection's Recv-Q (bytes the application has not read yet: a receiver that cannot
keep up shows here before it shows as a window limit) and its receive buffer.
summary() reduces the samples to per-sample aggregates (kept in a result row); run as a script
it prints the table of traced rows with their steady rate and start-up cost:

    python3 bench/wan/sstrace.py /work/data/h16c/m80.jsonl ...
"""
import json
import re
import sys
import threading
import time

FIELDS = {"cwnd": r"\bcwnd:(\d+)", "pacing": r"pacing_rate (\d+(?:\.\d+)?[KMG]?)bps",
          "delivery": r"delivery_rate (\d+(?:\.\d+)?[KMG]?)bps", "retrans": r"retrans:\d+/(\d+)",
          "unacked": r"unacked:(\d+)", "rwnd_limited_ms": r"rwnd_limited:(\d+)ms",
          "sndbuf_limited_ms": r"sndbuf_limited:(\d+)ms", "bytes_acked": r"bytes_acked:(\d+)"}
UNIT = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}


def rate(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)", text)
    return float(m.group(1)) * UNIT[m.group(2)]


def parse_conns(text):
    """ss -Htin output: one dict per connection (its first line has the queues, the second the info)."""
    conns, cur = [], None
    for line in text.splitlines():
        if not line.startswith((" ", "\t")):
            parts = line.split()
            cur = {"recv_q": int(parts[0]) if parts and parts[0].isdigit() else 0}
            conns.append(cur)
            continue
        if cur is None:
            continue
        for k, pat in FIELDS.items():
            m = re.search(pat, line)
            if m:
                cur[k] = rate(m.group(1)) if k in ("pacing", "delivery") else int(m.group(1))
    return conns


class SsTrace:
    def __init__(self, w, port, every=0.5, limit=120):
        self.w, self.port, self.every, self.limit = w, port, every, limit
        self.samples = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=5)

    def _ss(self, side, key):
        r = self.w.ex(side, ["ss", "-Htin", "state", "established", f"( {key} = :{self.port} )"], check=False)
        return parse_conns(r.stdout)

    def _run(self):
        t0 = time.monotonic()
        while not self._stop.is_set() and len(self.samples) < self.limit:
            snd, rcv = self._ss("a", "dport"), self._ss("b", "sport")
            self.samples.append({"t": round(time.monotonic() - t0, 2), "a": snd, "b": rcv})
            self._stop.wait(self.every)

    def summary(self):
        """Per sample: connections, summed cwnd/pacing/delivery, retransmitted segments so far,
        the receiver's unread bytes (sum and max over connections)."""
        out = []
        for s in self.samples:
            a, b = s["a"], s["b"]
            out.append({"t": s["t"], "n": len(a),
                        "cwnd": sum(c.get("cwnd", 0) for c in a),
                        "pacing_mbit": round(sum(c.get("pacing", 0) for c in a) / 1e6, 1),
                        "delivery_mbit": round(sum(c.get("delivery", 0) for c in a) / 1e6, 1),
                        "retrans": sum(c.get("retrans", 0) for c in a),
                        "unacked": sum(c.get("unacked", 0) for c in a),
                        "acked": sum(c.get("bytes_acked", 0) for c in a),
                        "rwnd_ms": sum(c.get("rwnd_limited_ms", 0) for c in a),
                        "sndbuf_ms": sum(c.get("sndbuf_limited_ms", 0) for c in a),
                        "recvq_sum": sum(c["recv_q"] for c in b),
                        "recvq_max": max((c["recv_q"] for c in b), default=0)})
        return out


def steady_mbit(row, after=4.0):
    """The median of a traced row's per-sample goodput once every stream is open and `after`
    seconds have passed: the rate past start-up (connection set-up and slow start), which a
    12 s run's goodput mixes in."""
    tr = row.get("trace") or []
    rates = sorted((b["acked"] - a["acked"]) * 8 / 1e6 / (b["t"] - a["t"]) for a, b in zip(tr, tr[1:])
                   if a["t"] >= after and b["n"] >= row["streams"] and b["acked"] >= a["acked"] and b["t"] > a["t"])
    return rates[len(rates) // 2] if rates else None


def steady_retrans_pct(row, after=4.0, mss=1448):
    """Retransmitted bytes over acknowledged bytes once `after` seconds have passed (h16g): the
    share past start-up, which a 12 s run's whole-run figure mixes with slow start's overshoot."""
    tr = [s for s in row.get("trace") or [] if s["t"] >= after and s["n"] >= row["streams"]]
    if len(tr) < 2 or tr[-1]["acked"] <= tr[0]["acked"]:
        return None
    return 100.0 * (tr[-1]["retrans"] - tr[0]["retrans"]) * mss / (tr[-1]["acked"] - tr[0]["acked"])


def main(paths):
    """Table of traced rows: goodput, the steady rate, and the seconds start-up cost (the run's
    length less what the steady rate would have moved in it)."""
    print("| file | RTT ms | loss % | tool | send args | streams | goodput Mbit/s | steady Mbit/s | start-up s | retrans % "
          "| line drops | cc | steady retrans % | rwnd-limited ms | Recv-Q max KB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        for line in open(p):
            r = json.loads(line)
            if "goodput_mbit" not in r or not isinstance(r["streams"], int):
                continue
            st = steady_mbit(r)
            lost = r["seconds"] - r["goodput_mbit"] * r["seconds"] / st if st else None
            print(f"| {p.split('/')[-1]} | {r['rtt_ms']:g} | {r['loss_pct']:g} | {r['tool']} | {r.get('send_args', '')} | "
                  f"{r['streams']} | {r['goodput_mbit']:.1f}{'' if r.get('complete') else '*'} | "
                  f"{'-' if st is None else f'{st:.1f}'} | {'-' if lost is None else f'{lost:.2f}'} | "
                  f"{r.get('retrans_pct') or 0:.2f} | {r.get('line_drops', '-')} | {r.get('cc', '-')} | "
                  f"{'-' if (sr := steady_retrans_pct(r)) is None else f'{sr:.2f}'} | "
                  f"{max((x['rwnd_ms'] for x in r.get('trace') or []), default=0)} | "
                  f"{max((x['recvq_max'] for x in r.get('trace') or []), default=0) / 1024:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
