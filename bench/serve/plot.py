#!/usr/bin/env python3
"""Requests/s against connections, sluice vs nginx, from run.py --out JSON files (keep-alive and
`Connection: close` runs; one panel per file size).
usage: plot.py OUT.png RESULTS.json...   (needs matplotlib: apt-get install python3-matplotlib)"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out, files = sys.argv[1], sys.argv[2:]
    rows = [r for f in files for r in json.load(open(f))["runs"]]
    sizes = sorted({r["file"] for r in rows}, key=lambda s: int(s.rstrip("k")))
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4.5), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for server, color in (("sluice", "tab:blue"), ("nginx", "tab:orange"), ("nginx-noaio", "tab:gray")):
            for close, style in ((False, "-o"), (True, "--s")):
                pts = sorted((r["conns"], r["rps"]) for r in rows
                             if r["server"] == server and r["file"] == size and bool(r.get("close")) == close)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color,
                            label=f"{server}{', Connection: close' if close else ', keep-alive'}")
        ax.set_xscale("log")
        ax.set_xlabel("connections (wrk -t1)")
        ax.set_ylabel("requests/s")
        ax.set_title(f"{size.upper()}B file, server on 1 CPU")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
