#!/usr/bin/env python3
"""Bar chart per stage (copies per payload byte, CPU s/GB) from a copy-overhead run's traces.

usage: plot.py OUT_DIR ROW...   -> OUT_DIR/copies.png
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out, rows = sys.argv[1], sys.argv[2:]
    labels, copies, kcopies, cpu = [], [], [], []
    for row in rows:
        for side in ("send", "recv"):
            with open(os.path.join(out, f"{row}.{side}.json")) as f:
                rep = json.load(f)
            payload = rep["summary"]["payload_bytes"] or 1
            for st in rep["stages"]:
                moved = st["copied_bytes"] + st["zero_copy_bytes"] + st["no_data_bytes"]
                if moved < payload // 100:
                    continue  # wrappers (sh) that move no payload
                labels.append(f"{row} {side}\n{st['comm']}")
                copies.append(st["copied_bytes"] / payload)
                kcopies.append(st["kernel_copy_bytes"] / payload)
                cpu.append(st["cpu_ns"] / 1e9 / (payload / 1e9))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, len(labels) * 0.9), 7), sharex=True)
    x = range(len(labels))
    ax1.bar(x, copies, label="user<->kernel copies")
    ax1.bar(x, kcopies, bottom=copies, label="in-kernel copies")
    ax1.set_ylabel("CPU copies per payload byte")
    ax1.set_ylim(0, max([c + k for c, k in zip(copies, kcopies)] + [1]) * 1.2)
    ax1.legend()
    ax2.bar(x, cpu, color="tab:red")
    ax2.set_ylabel("on-CPU s per GB")
    ax2.set_xticks(list(x))
    ax2.set_xticklabels(labels, fontsize=8)
    fig.suptitle("sluice trace: copies and CPU per stage, loopback")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "copies.png"), dpi=110)


if __name__ == "__main__":
    main()
