#!/usr/bin/env python3
"""OUT/plot.png from OUT/results.json of bench/cost-vs-size/run.py: files/s, CPU s/GB per side
and peak RSS per side against the set's size (file count, log scale), one line per tool. A flat
line is the goal (issue 19).  Usage: /usr/bin/python3 bench/cost-vs-size/plot.py OUT [MORE_OUT...]
(runs split over several calls, one per tool or scale: their rows are plotted together into OUT)"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    with open(os.path.join(out, "results.json")) as f:
        res = json.load(f)
    rows = [r for r in res["summary"] if r["ok_runs"]]
    for more in sys.argv[2:]:
        with open(os.path.join(more, "results.json")) as f:
            rows += [r for r in json.load(f)["summary"] if r["ok_runs"]]
    tools = list(dict.fromkeys(r["tool"] for r in rows))
    fig, ax = plt.subplots(1, 3, figsize=(17, 4.6))
    for i, t in enumerate(tools):
        rs = sorted((r for r in rows if r["tool"] == t), key=lambda r: r["files"])
        x = [r["files"] for r in rs]
        c = f"C{i}"
        ax[0].plot(x, [r["files_s"] for r in rs], "o-", color=c, label=t)
        ax[1].plot(x, [r["cpu_send_s_per_gb"] for r in rs], "o--", color=c, label=f"{t} send")
        ax[1].plot(x, [r["cpu_recv_s_per_gb"] for r in rs], "s-", color=c, label=f"{t} recv")
        ax[2].plot(x, [r["rss_send_mib"] for r in rs], "o--", color=c, label=f"{t} send")
        ax[2].plot(x, [r["rss_recv_mib"] for r in rs], "s-", color=c, label=f"{t} recv")
    titles = ("files/s", "CPU s/GB per side (user + system)", "peak RSS per side, MiB")
    for a, title in zip(ax, titles):
        a.set_xscale("log")
        a.set_xlabel("files in the set (minor: 1-400 KiB each)")
        a.set_title(title)
        a.set_ylim(bottom=0)
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(f"Cost against size, minor set, cold cache, loopback ({res['meta']['date']})")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plot.png"), dpi=110)
    print(os.path.join(out, "plot.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
