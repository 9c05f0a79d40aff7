#!/usr/bin/env python3
"""Plots A/B results side by side: for each workload (a results.json written by run.py), the
median MB/s and the median CPU s/GB of both sides, one bar per variant, with every round as a dot.

usage: plot.py OUT.png LABEL=RESULTS.json [LABEL=RESULTS.json ...] [--names A,B]
  --names  short names for the variants, in the order run.py was given them
"""
import argparse
import json
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("out")
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--names")
    a = ap.parse_args()
    sets = [s.split("=", 1) for s in a.sets]
    loaded = [(label, json.load(open(path))) for label, path in sets]
    variants = list(loaded[0][1]["runs"])
    names = a.names.split(",") if a.names else variants
    fig, (ax_mb, ax_cpu) = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / len(variants)
    for i, (label, res) in enumerate(loaded):
        gb = res["bytes"] / 1e9
        for j, v in enumerate(variants):
            runs = res["runs"][v]
            mbs = [res["bytes"] / r["seconds"] / 1e6 for r in runs]
            cpu = [(r["cpu_send"] + r["cpu_recv"]) / gb for r in runs]
            x = i + (j - (len(variants) - 1) / 2) * width
            for ax, vals in ((ax_mb, mbs), (ax_cpu, cpu)):
                ax.bar(x, statistics.median(vals), width, color=f"C{j}", label=names[j] if i == 0 else None)
                ax.scatter([x] * len(vals), vals, s=8, color="black", zorder=3)
    for ax, title in ((ax_mb, "MB/s (median, dots: rounds)"), (ax_cpu, "CPU s/GB, both sides (median)")):
        ax.set_xticks(range(len(loaded)))
        ax.set_xticklabels([label for label, _ in loaded])
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
