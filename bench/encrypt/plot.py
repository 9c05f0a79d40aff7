#!/usr/bin/env python3
"""docs/img/encrypt-*.png from run.py's results.jsonl: median MB/s and CPU s/GB per case and
tool (encrypted sluice against WDT's encrypted run; sluice with its records on OpenSSL, an
earlier sluice build (run.py's sluice-old tools) and iperf3 too where the file has them), one
bar group per case; failed runs are left out.
Usage: /usr/bin/python3 bench/encrypt/plot.py RESULTS.jsonl OUT.png [TITLE]"""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    groups = {}
    for r in rows:
        if "failed" in r:  # a tool's failed run (run.py records it): no figures
            continue
        case = r["case"] + (", " + r["set"] if r.get("set") else "")
        tool = {"sluice": "sluice encrypted", "sluice-enc": "sluice encrypted", "wdt-enc": "WDT encrypted", "wdt-enc-t60": "WDT encrypted, 60 s timeouts",
                "sluice-openssl": "sluice encrypted, OpenSSL engine", "sluice-enc-openssl": "sluice encrypted, OpenSSL engine",
                "sluice-old": "sluice encrypted, earlier build", "sluice-old-enc": "sluice encrypted, earlier build",
                "iperf3": "iperf3 (clear)"}.get(r["tool"])
        if tool:
            groups.setdefault(case, {}).setdefault(tool, []).append(r)
    cases = list(groups)
    order = ["sluice encrypted", "sluice encrypted, earlier build", "sluice encrypted, OpenSSL engine", "WDT encrypted",
             "iperf3 (clear)"]
    tools = [t for t in order if any(t in g for g in groups.values())]
    fig, (ax_mb, ax_cpu) = plt.subplots(1, 2, figsize=(12, 4.5))
    w = 0.8 / len(tools)
    for k, tool in enumerate(tools):
        xs = [i + (k - (len(tools) - 1) / 2) * w for i in range(len(cases))]
        mb = [statistics.median(r["mb_s"] for r in groups[c].get(tool, [])) if groups[c].get(tool) else 0 for c in cases]
        # The tools' own CPU where run.py measured it (a shared machine's load does not inflate it).
        cpu = [statistics.median(r.get("tool_cpu_s_per_gb", r["cpu_s_per_gb"]) for r in groups[c].get(tool, []))
               if groups[c].get(tool) else 0 for c in cases]
        ax_mb.bar(xs, mb, w, label=tool)
        ax_cpu.bar(xs, cpu, w, label=tool)
    for ax, title in ((ax_mb, "MB/s (median of the rounds, higher is better)"), (ax_cpu, "CPU s/GB: the tools' own where measured, else the machine's (lower is better)")):
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(cases, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(sys.argv[3] if len(sys.argv) > 3 else "Issue 18, second part: encrypted data streams without a relay (h18b)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)


if __name__ == "__main__":
    main()
