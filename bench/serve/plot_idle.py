#!/usr/bin/env python3
"""Idle connections held against memory per connection and wrk's ratios, from idle.py --out
JSON files (one per step).
usage: plot_idle.py OUT.png STEP.json...   (needs matplotlib: apt-get install python3-matplotlib)"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def finish(ax, ylabel, title):
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("idle connections held")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)


def main():
    out, files = sys.argv[1], sys.argv[2:]
    steps = sorted((json.load(open(f)) for f in files), key=lambda r: r.get("held", 0))
    steps = [r for r in steps if r.get("held")]
    held = [r["held"] for r in steps]
    fig, (mem, ratio) = plt.subplots(1, 2, figsize=(12, 4.5))
    for key, label, style in (("server_pss_per_conn_vs_min_slots", "server Pss (sum over K)", "-o"),
                              ("server_private_per_conn_vs_min_slots", "server Private (sum over K)", "-s"),
                              ("server_rss_per_conn_vs_min_slots", "server RSS (sum over K)", ":^")):
        mem.plot(held, [r[key] for r in steps], style, label=label)
    mem.plot(held, [r["kernel_slab_per_conn"] / 10 for r in steps], "--x", label="kernel Slab / 10 (both ends)")
    mem.axhline(1024, color="tab:red", lw=0.8, label="goal: 1 KiB of server user-space memory")
    for r in steps:
        mem.annotate(f"K={r['server_procs']}", (r["held"], r["server_pss_per_conn_vs_min_slots"]),
                     textcoords="offset points", xytext=(0, 8), fontsize=8, ha="center")
    finish(mem, "bytes per held connection", "memory per idle connection (vs the same K servers with one slot each)")
    ratio.plot(held, [r["rps_ratio"] for r in steps], "-o", label="wrk requests/s: held / none")
    ratio.plot(held, [r["p99_ratio"] for r in steps], "-s", label="wrk p99: held / none")
    ratio.axhline(0.8, color="tab:blue", lw=0.8, ls=":", label="goal: requests/s at least 0.8")
    ratio.axhline(2.0, color="tab:orange", lw=0.8, ls=":", label="goal: p99 at most 2x")
    finish(ratio, "ratio (same K processes, same run)", "100 active connections (wrk -c100, 1 KB) while idle ones are held")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
