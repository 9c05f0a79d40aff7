#!/usr/bin/env python3
"""Server CPU seconds per GB (and MB/s) of 16 clients x 1 GiB, sluice vs nginx, warm and cold
page cache, one bar per run, from large.py --out JSON files (several runs: all are drawn).
usage: plot_large.py OUT.png RESULTS.json...   (needs matplotlib: apt-get install python3-matplotlib)"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERVERS = (("sluice", "tab:blue"), ("nginx", "tab:orange"), ("nginx-noaio", "tab:gray"))


def main():
    out, files = sys.argv[1], sys.argv[2:]
    rows = [r for f in files for r in json.load(open(f))["large"]]
    caches = [c for c in ("warm", "cold") if any(r["cache"] == c for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, key, label in ((axes[0], "cpu_s_per_gb", "server CPU s per GB"), (axes[1], "mb_s", "aggregate MB/s")):
        for i, cache in enumerate(caches):
            for j, (server, color) in enumerate(SERVERS):
                vals = [r[key] for r in rows if r["cache"] == cache and r["server"] == server]
                xs = [i * 4 + j + (k - (len(vals) - 1) / 2) * 0.18 for k in range(len(vals))]
                ax.bar(xs, vals, width=0.16, color=color, label=server if i == 0 and vals else None)
            goal = [r[key] for r in rows if r["cache"] == cache and r["server"] == "nginx"]
            if key == "cpu_s_per_gb" and goal:  # the goal: at most 0.7x nginx's CPU per GB
                ax.hlines(0.7 * sum(goal) / len(goal), i * 4 - 0.5, i * 4 + 2.5, colors="tab:red", linestyles="dashed",
                          label="goal: 0.7x nginx (mean)" if i == 0 else None)
        link = [r["mb_s"] for r in rows if r["server"] == "iperf3"]
        if key == "mb_s" and link:  # the goal: 16 clients at least 0.9x iperf3 -P 16 on the same link
            ax.axhline(0.9 * sum(link) / len(link), color="tab:red", linestyle="dashed", label="goal: 0.9x iperf3 -P 16 (mean)")
            ax.legend(loc="lower center", fontsize=8)
        ax.set_xticks([i * 4 + 1 for i in range(len(caches))], [f"page cache {c}" for c in caches])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(loc="lower center", fontsize=8)
    fig.suptitle("16 curl clients x 1 GiB, one server CPU (each bar one run)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main()
