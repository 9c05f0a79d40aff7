#!/usr/bin/env python3
"""docs/img/encrypt-rounds-*.png from run.py's results (one or more .jsonl): for each round,
encrypted sluice's rate over WDT's encrypted rate and over sluice's own clear rate in the same
round, against the machine's load when the round ran. On this shared machine a call's median
depends on its window; the rounds show how the ratio moves with the load.
Usage: /usr/bin/python3 bench/encrypt/plot_rounds.py OUT.png TITLE RESULTS.jsonl..."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rounds(path):
    """Rows of one run.py call grouped by round: run.py runs every tool once per round, in order."""
    rows = [json.loads(line) for line in open(path) if line.strip()]
    out, cur = [], {}
    for r in rows:
        if r["tool"] in cur:
            out.append(cur)
            cur = {}
        cur[r["tool"]] = r
    return out + [cur] if cur else out


def main():
    out, title, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    load, vs_wdt, vs_clear = [], [], []
    for f in files:
        for rd in rounds(f):
            if "sluice" in rd and "wdt-enc" in rd:
                load.append(rd["sluice"]["loadavg"])
                vs_wdt.append(rd["sluice"]["mb_s"] / rd["wdt-enc"]["mb_s"])
                vs_clear.append(rd["sluice"]["mb_s"] / rd["sluice-clear"]["mb_s"] if "sluice-clear" in rd else None)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter(load, vs_wdt, label="sluice encrypted / WDT encrypted")
    pts = [(x, y) for x, y in zip(load, vs_clear) if y is not None]
    if pts:
        ax.scatter(*zip(*pts), marker="x", label="sluice encrypted / sluice clear")
    ax.axhline(1.5, linestyle="--", color="grey", label="the issue's goal vs WDT (1.5x)")
    ax.set_xlabel("1-minute load average when the round ran (2 vCPUs)")
    ax.set_ylabel("rate ratio, same round")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main()
