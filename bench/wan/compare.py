#!/usr/bin/env python3
"""Two sluice binaries side by side through the emulator (run.py --tools sluice,base --base B
--repeat N): per cell (RTT, loss, streams) the median goodput of each over its runs, their
ratio, and each one's "no collapse" ratio: its median at N streams over its best median with
fewer streams in the same file(s) (issue 16's goal: at least 0.9).

    python3 bench/wan/run.py --report A.jsonl,B.jsonl --compare --plot docs/img/x.png
"""
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sstrace  # noqa: E402

TOOLS = ("base", "sluice")


def load(files):
    rows = []
    for f in files:
        rows += [json.loads(line) for line in open(f) if line.strip()]
    return [r for r in rows if r.get("tool") in TOOLS and isinstance(r.get("streams"), int)]


def cells(rows):
    """(rtt, loss, streams, tool) -> goodputs, steady rates and retransmit shares of its runs."""
    out = {}
    for r in rows:
        c = out.setdefault((r["rtt_ms"], r["loss_pct"], r["streams"], r["tool"]),
                           {"goodput": [], "steady": [], "retrans": [], "drops": 0, "errors": 0})
        if "goodput_mbit" not in r:
            c["errors"] += 1
            continue
        c["goodput"].append(r["goodput_mbit"])
        c["retrans"].append(r.get("retrans_pct") or 0)
        c["drops"] += r.get("line_drops", 0)
        if r.get("trace") and sstrace.steady_mbit(r):
            c["steady"].append(sstrace.steady_mbit(r))
    return out


def med(v):
    return statistics.median(v) if v else None


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def no_collapse(c, rtt, loss, n, tool):
    """Median at n over the best median with fewer streams (None without a smaller count)."""
    here = med(c.get((rtt, loss, n, tool), {}).get("goodput", []))
    fewer = [med(v["goodput"]) for (r, l, m, t), v in c.items()
             if (r, l, t) == (rtt, loss, tool) and m < n and v["goodput"]]
    return here / max(fewer) if here and fewer else None


def report(files, plot_path=None, title=None):
    c = cells(load(files))
    keys = sorted({k[:3] for k in c})
    print("| RTT ms | loss % | streams | main: runs (median) | branch: runs (median) | branch/main | "
          "vs best fewer: main / branch | retrans % main / branch | line drops |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rtt, loss, n in keys:
        b, s = c.get((rtt, loss, n, "base")), c.get((rtt, loss, n, "sluice"))

        def runs(x):
            if not x:
                return "-"
            return ", ".join(fmt(g) for g in x["goodput"]) + f" (**{fmt(med(x['goodput']))}**)" + \
                (f", {x['errors']} failed" if x["errors"] else "")
        ratio = med(s["goodput"]) / med(b["goodput"]) if s and b and s["goodput"] and b["goodput"] else None
        nc = " / ".join(fmt(no_collapse(c, rtt, loss, n, t), 2) for t in TOOLS)
        rt = " / ".join(fmt(med(x["retrans"]) if x else None, 2) for x in (b, s))
        drops = sum(x["drops"] for x in (b, s) if x)
        print(f"| {rtt:g} | {loss:g} | {n} | {runs(b)} | {runs(s)} | {fmt(ratio, 2)} | {nc} | {rt} | {drops} |")
    if plot_path:
        plot(c, plot_path, title)


def plot(c, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = sorted({(k[0], k[1]) for k in c})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    style = {"base": ("C7", "main"), "sluice": ("C1", "branch (sends as streams open)")}
    for ax, (rtt, loss) in zip(axes[0], panels):
        for tool in TOOLS:
            pts = sorted((k[2], v) for k, v in c.items() if k[:2] == (rtt, loss) and k[3] == tool and v["goodput"])
            if not pts:
                continue
            color, label = style[tool]
            for n, v in pts:
                ax.plot([n] * len(v["goodput"]), v["goodput"], ".", color=color, alpha=0.5)
            ax.plot([p[0] for p in pts], [med(p[1]["goodput"]) for p in pts], "-o", color=color, label=label + " (median)")
        ticks = sorted({k[2] for k in c if k[:2] == (rtt, loss)})
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_title(f"RTT {rtt:g} ms, loss {loss:g}%" + (f" ({title})" if title else ""))
        ax.set_xlabel("streams")
        ax.set_ylabel("goodput Mbit/s (12 s, start-up included)")
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
