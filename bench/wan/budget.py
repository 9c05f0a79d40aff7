#!/usr/bin/env python3
"""Where a whole transfer's time went (issue 16, h16s): rows of run.py with --trace (the
acknowledged bytes sampled from ss) and --log (the sender's -v lines, each with its time),
against the ideal, the file at the line's goodput ceiling.

    python3 bench/wan/budget.py --rate 1000 FILE.jsonl ... [--plot docs/img/x.png]

Per row: the time to the first data stream open (connect, handshakes), the ramp (until 25 MB
were acknowledged), the steady part and its rate, the end (the last 85 MB of the file: about
the last 0.7 s at the ceiling), and the whole. The ceiling is the line's rate times the
payload's share of a frame (1448 of 1514 bytes) times the share not lost (random loss is
taken after the bottleneck, so a lost frame used the line).
"""
import argparse
import json
import sys

PAYLOAD_SHARE = 1448 / 1514


def ceiling_mbit(rate, loss_pct):
    return rate * PAYLOAD_SHARE * (1 - loss_pct / 100)


def first_at(trace, nbytes):
    return next((s["t"] for s in trace if s["acked"] >= nbytes), None)


def budget(r, rate):
    # The file's size: a complete row's bytes (run.py --size), else the 1 GiB default.
    total = r["bytes"] if r.get("complete") else r.get("file_bytes") or 1 << 30
    trace = r.get("trace") or []
    opened = next((t for t, line in r.get("log", []) if "data stream 1 open" in line), None)
    # The ramp's 25 MB and the end's 85 MB are at 1 Gbit/s; a slower line scales them (h16t:
    # 2.5 and 8.5 MB at 100 Mbit/s), so each stays ~0.2 s and ~0.7 s at the ceiling.
    scale = rate / 1000
    ramp = first_at(trace, 25e6 * scale)
    tail = first_at(trace, total - 85e6 * scale)
    end = r["seconds"] if r.get("complete") else None
    ideal = total * 8 / ceiling_mbit(rate, r["loss_pct"]) / 1e6
    steady = (total - (85e6 + 25e6) * scale) * 8 / (tail - ramp) / 1e6 if ramp and tail and tail > ramp else None
    return {"tool": r["tool"], "streams": r["streams"], "loss": r["loss_pct"], "mbit": r.get("goodput_mbit"),
            "open_s": opened if opened is not None else r.get("connect_s"), "ramp_s": ramp, "steady_mbit": steady,
            "tail_s": end - tail if end and tail else None, "seconds": end, "ideal_s": ideal}


def fmt(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--plot")
    ap.add_argument("--title", default="")
    ap.add_argument("--xmax", type=float, help="with --plot: only the first XMAX seconds (the start-up)")
    a = ap.parse_args()
    rows = [json.loads(l) for f in a.files for l in open(f) if l.strip()]
    rows = [r for r in rows if r.get("trace")]
    print("| tool | streams | loss % | Mbit/s | first data stream open s | 25 MB acknowledged at s | steady Mbit/s "
          "| last 85 MB took s | whole s | ideal s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        b = budget(r, a.rate)
        print(f"| {b['tool']} | {b['streams']} | {b['loss']:g} | {fmt(b['mbit'], 1)} | {fmt(b['open_s'])} | "
              f"{fmt(b['ramp_s'])} | {fmt(b['steady_mbit'], 0)} | {fmt(b['tail_s'])} | {fmt(b['seconds'])} | "
              f"{fmt(b['ideal_s'])} |")
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for r in rows:
            t = [s["t"] for s in r["trace"]]
            mb = [s["acked"] / 1e6 for s in r["trace"]]
            ax.plot(t, mb, label=f"{r['tool']} {r['streams']} @ {r['loss_pct']:g}% ({fmt(r.get('goodput_mbit'), 0)} Mbit/s)")
        rate = ceiling_mbit(a.rate, 0) / 8
        top = max(r["bytes"] for r in rows) / 1e6
        ax.plot([0, top / rate], [0, top], "k:", label="the ceiling from t = 0")
        if a.xmax:
            ax.set_xlim(0, a.xmax)
            ax.set_ylim(0, rate * a.xmax)
        ax.set_xlabel("seconds from the sender's start")
        ax.set_ylabel("MB acknowledged")
        ax.set_title(f"{top:.0f} MB at {rows[0]['rtt_ms']:g} ms, {a.rate:g} Mbit/s{a.title}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(a.plot, dpi=90)
    return 0


if __name__ == "__main__":
    sys.exit(main())
