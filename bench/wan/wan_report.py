"""bench/wan/run.py --report: the markdown table and the plot of a results file (JSON lines)."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sstrace  # noqa: E402


def stream_key(n):
    """Counts in order, "auto" after them."""
    return (0, n) if isinstance(n, int) else (1, 0)


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def report(a):
    """Markdown table: goodput Mbit/s (* partial: still running at the time bound, measured from
    ss), retransmitted bytes as % of goodput bytes, CPU s/GB, and frames the emulator itself
    dropped (its queue or socket: an emulator limit, not the path's loss)."""
    rows = [json.loads(l) for l in open(a.report) if l.strip()]
    print("| RTT ms | loss % | streams | sluice cubic | sluice bbr | iperf3 cubic | iperf3 bbr | "
          "retrans % (s cubic / s bbr / i cubic / i bbr) | CPU s/GB (s bbr / i bbr) | line drops | s/i bbr |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    cells = {}
    for r in rows:  # a cell run again later replaces the earlier one
        cells[(r["rtt_ms"], r["loss_pct"], r["streams"], r["tool"], r["cc"])] = r
    keys = sorted({(r["rtt_ms"], r["loss_pct"], r["streams"]) for r in rows}, key=lambda k: (k[0], k[1], stream_key(k[2])))
    order = [("sluice", "cubic"), ("sluice", "bbr"), ("iperf3", "cubic"), ("iperf3", "bbr")]
    for k in keys:
        got = [cells.get(k + o) for o in order]
        gp = []
        for g in got:
            if not g or "goodput_mbit" not in g:
                gp.append("error" if g else "-")
            else:
                gp.append(fmt(g["goodput_mbit"], 1) + ("" if g.get("complete") else "*"))
        rt = " / ".join(fmt(g.get("retrans_pct"), 2) if g else "-" for g in got)
        cpu = " / ".join(fmt(g.get("cpu_s_per_gb"), 2) if g else "-" for g in (got[1], got[3]))
        drops = [g["line_drops"] for g in got if g and "line_drops" in g]
        ratio = got[1]["goodput_mbit"] / got[3]["goodput_mbit"] if got[1] and got[3] and \
            got[1].get("goodput_mbit") and got[3].get("goodput_mbit") else None
        print(f"| {k[0]:g} | {k[1]:g} | {k[2]} | " + " | ".join(gp) + f" | {rt} | {cpu} | " +
              (str(sum(drops)) if drops else "n/a") + f" | {fmt(ratio, 2)} |")
    peer_rows = [r for r in cells.values() if r["tool"] not in ("sluice", "iperf3")]
    if peer_rows:
        print("\n| RTT ms | loss % | streams | peer | cc | goodput Mbit/s | sluice same cc, same streams |")
        print("|---|---|---|---|---|---|---|")
        for r in sorted(peer_rows, key=lambda r: (r["rtt_ms"], r["loss_pct"], stream_key(r["streams"]), r["tool"], r["cc"])):
            s = cells.get((r["rtt_ms"], r["loss_pct"], r["streams"], "sluice", r["cc"]))
            gp = fmt(r.get("goodput_mbit"), 1) + ("" if r.get("complete") else "*") if "goodput_mbit" in r else "error"
            sg = fmt(s.get("goodput_mbit"), 1) + ("" if s.get("complete") else "*") if s and "goodput_mbit" in s else "-"
            print(f"| {r['rtt_ms']:g} | {r['loss_pct']:g} | {r['streams']} | {r['tool']} | {r['cc']} | {gp} | {sg} |")
    if a.plot:
        plot([r for r in cells.values() if r["tool"] in ("sluice", "iperf3")], a.plot, order,
             f" ({a.title})" if a.title else "")


def plot(rows, path, order, a_title=""):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rtts = sorted({r["rtt_ms"] for r in rows})
    losses = sorted({r["loss_pct"] for r in rows})
    fig, axes = plt.subplots(len(rtts), len(losses), figsize=(4 * len(losses), 3.2 * len(rtts)), squeeze=False)
    styles = {("sluice", "cubic"): "C0-o", ("sluice", "bbr"): "C1-o", ("iperf3", "cubic"): "C0--s",
              ("iperf3", "bbr"): "C1--s"}
    for i, rtt in enumerate(rtts):
        for j, loss in enumerate(losses):
            ax = axes[i][j]
            for tool, cc in order:
                mine = [r for r in rows if r["rtt_ms"] == rtt and r["loss_pct"] == loss and r["tool"] == tool and
                        r["cc"] == cc and r.get("goodput_mbit", 0) > 0]
                pts = sorted((r["streams"], r["goodput_mbit"]) for r in mine if isinstance(r["streams"], int))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[(tool, cc)], label=f"{tool} {cc}")
                # traced rows (--trace): the rate past start-up as a thin line of its own
                steady = sorted((r["streams"], sstrace.steady_mbit(r)) for r in mine
                                if isinstance(r["streams"], int) and r.get("trace") and sstrace.steady_mbit(r))
                if steady:
                    mark = "x:" if tool == "sluice" else "+:"
                    ax.plot([p[0] for p in steady], [p[1] for p in steady], styles[(tool, cc)][:2] + mark,
                            linewidth=1, label=f"{tool} {cc} steady")
                for r in mine:  # --streams auto: a level line across the counts
                    if r["streams"] == "auto":
                        ax.axhline(r["goodput_mbit"], color=styles[(tool, cc)][:2], linestyle=":",
                                   label=f"{tool} {cc} auto")
            ax.set_xscale("log", base=2)
            ticks = sorted({r["streams"] for r in rows if isinstance(r["streams"], int)})
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_yscale("log")
            ax.set_title(f"RTT {rtt:g} ms, loss {loss:g}%{a_title}")
            ax.set_xlabel("streams")
            ax.set_ylabel("goodput Mbit/s")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
