#!/usr/bin/env python3
"""Server CPU per GB of 16 clients x 1 GiB relative to nginx's in the same round, for every
server large.py ran (sluice builds, the sendfile-only floors), one group per call and round,
with the issue's goal (0.7x nginx) as a line: whether any server reaches it on this kernel.
usage: plot_floor.py OUT.png RESULTS.json...   (needs matplotlib)"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"sluice": "tab:blue", "sluice-b": "tab:cyan", "sluice-c": "tab:purple", "nginx": "tab:orange",
          "floor-epoll": "tab:green", "floor-thread": "tab:olive"}


def main():
    out, files = sys.argv[1], sys.argv[2:]
    groups = []  # (label, {server: ratio})
    for n, f in enumerate(files):
        rows = [r for r in json.load(open(f))["large"] if r["server"] != "iperf3" and r["cache"] == "warm"]
        for rnd in sorted({r["round"] for r in rows}):
            by = {r["server"]: r["cpu_s_per_gb"] for r in rows if r["round"] == rnd}
            if "nginx" in by:
                groups.append((f"call {n + 1}\nround {rnd}", {s: v / by["nginx"] for s, v in by.items()}))
    fig, ax = plt.subplots(figsize=(12, 4.5))
    servers = [s for s in COLORS if any(s in g for _, g in groups)]
    width = 0.8 / len(servers)
    for j, s in enumerate(servers):
        xs = [i + (j - (len(servers) - 1) / 2) * width for i, (_, g) in enumerate(groups) if s in g]
        ax.bar(xs, [g[s] for _, g in groups if s in g], width=width * 0.9, color=COLORS[s], label=s)
    ax.axhline(0.7, color="tab:red", linestyle="dashed", label="goal: 0.7x nginx")
    ax.set_xticks(range(len(groups)), [lbl for lbl, _ in groups], fontsize=8)
    ax.set_ylabel("server CPU per GB / nginx's (same round)")
    ax.set_ylim(0, 1.45)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper center", fontsize=8, ncol=7)
    fig.suptitle("16 curl clients x 1 GiB warm, one server CPU: no server, not even sendfile alone, reaches 0.7x nginx")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main()
