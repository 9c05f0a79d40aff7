#!/usr/bin/env python3
"""PNG of one scale's results from bench/cost-vs-size/run.py as bars, one per tool: files/s, CPU
s/GB per side and for the machine, peak RSS per side, with every run as a dot (the bar is the
median). For a set measured at one size (the small set at full size, issue 19), where plot.py's
lines against size would be single points.
  /usr/bin/python3 bench/cost-vs-size/bars.py PNG TITLE OUT[=LABEL] [MORE_OUT[=LABEL]...]
LABEL renames that OUT's sluice runs (two builds measured in separate calls)."""
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [("files/s", ["files_s"]), ("CPU s/GB (send, recv, machine)", ["cpu_send_s_per_gb", "cpu_recv_s_per_gb",
                                                                         "cpu_machine_s_per_gb"]),
          ("peak RSS MiB (send, recv)", ["rss_send_mib", "rss_recv_mib"])]


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    png, title = sys.argv[1], sys.argv[2]
    runs = []
    for arg in sys.argv[3:]:
        out, _, label = arg.partition("=")
        with open(os.path.join(out, "results.json")) as f:
            for r in json.load(f)["runs"]:
                if r["ok"]:
                    runs.append(dict(r, tool=label or r["tool"]) if r["tool"] == "sluice" else r)
    tools = list(dict.fromkeys(r["tool"] for r in runs))
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 4.4))
    for ax, (name, keys) in zip(axes, PANELS):
        width = 0.8 / len(keys)
        for k, key in enumerate(keys):
            for i, t in enumerate(tools):
                vals = [r[key] for r in runs if r["tool"] == t and r.get(key) is not None]
                if not vals:
                    continue
                x = i + (k - (len(keys) - 1) / 2) * width
                ax.bar(x, statistics.median(vals), width * 0.9, color=f"C{k}", label=key if i == 0 else None)
                ax.plot([x] * len(vals), vals, "k.", ms=4)
                ax.annotate(f"{statistics.median(vals):,.2f}" if statistics.median(vals) < 10 else
                            f"{statistics.median(vals):,.0f}", (x, statistics.median(vals)), ha="center",
                            va="bottom", fontsize=7)
        ax.set_xticks(range(len(tools)), tools)
        ax.set_title(name)
        if len(keys) > 1:
            ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
