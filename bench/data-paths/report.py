#!/usr/bin/env python3
"""Tables (OUT/results.md) and the plot (OUT/data-paths.png) of a data-paths run.

usage: report.py OUT_DIR [--plot PNG]
Medians over rounds; CPU is seconds per 10^9 bytes moved, per side; RSS is the peak of each
process in MiB.
"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def group(rows):
    g = defaultdict(list)
    for r in rows:
        g[(r["name"], r["streams"], r.get("block"))].append(r)
    out = {}
    for k, rs in g.items():
        out[k] = {
            "mb_s": med([r["mb_s"] for r in rs]),
            "min": min(r["mb_s"] for r in rs),
            "max": max(r["mb_s"] for r in rs),
            "n": len(rs),
            "send": med([r["cpu_s_gb_send"] for r in rs]),
            "recv": med([r["cpu_s_gb_recv"] for r in rs]),
            "rss_send": max(r["rss_send_kb"] for r in rs) / 1024,
            "rss_recv": max(r["rss_recv_kb"] for r in rs) / 1024,
            "paths": sorted({f"{r.get('send_path', '')}->{r.get('recv_path', '')}" for r in rs if "send_path" in r}),
            "fallbacks": sorted({f for r in rs for f in r.get("send_fallbacks", []) + r.get("recv_fallbacks", [])}),
        }
    return out


def fmt_range(v):
    return f"{v['mb_s']:.0f}" + (f" ({v['min']:.0f}-{v['max']:.0f})" if v["n"] > 1 else "")


def short_fallbacks(fbs):
    # The zc "kernel copied" note is per stream: one line is enough in a table.
    seen = []
    for f in fbs:
        key = "zc: the kernel copied" if "kernel copied" in f else f
        if key not in seen:
            seen.append(key)
    return "; ".join(seen)


def table(rows, ref_name=None, by_streams=True):
    g = group(rows)
    lines = ["| run | streams | MB/s | " + (f"x {ref_name} | " if ref_name else "") +
             "CPU s/GB send | CPU s/GB recv | CPU s/GB total | peak RSS MiB send / recv | notes |",
             "|---|---|---|" + ("---|" if ref_name else "") + "---|---|---|---|---|"]
    for (name, streams, block), v in sorted(g.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2] or "")):
        if block:
            name += f", block {block}"
        ref = ""
        if ref_name:
            rv = g.get((ref_name, streams, block))
            ref = f"{v['mb_s'] / rv['mb_s']:.2f} | " if rv else "- | "
        lines.append(f"| {name} | {streams} | {fmt_range(v)} | {ref}{v['send']:.3f} | {v['recv']:.3f} | "
                     f"{v['send'] + v['recv']:.3f} | {v['rss_send']:.0f} / {v['rss_recv']:.0f} | {short_fallbacks(v['fallbacks'])} |")
    return "\n".join(lines)


def main():
    out = Path(sys.argv[1])
    data = json.loads((out / "results.json").read_text())
    res, meta = data["results"], data["meta"]
    md = [f"size {meta['size'] / 2**30:.0f} GiB, kernel {meta['kernel']}, {meta['sluice_version']}, "
          f"bench wall time {meta['wall_s'] / 60:.1f} min, args `{json.dumps({k: v for k, v in meta['args'].items() if k not in ('sluice', 'out')})}`\n"]
    sec = lambda s: [r for r in res if r["section"] == s]
    if sec("goals"):
        md += ["## Goals: default sender vs iperf3 -Z -F, default file-to-file vs nc (medians, min-max)\n",
               table(sec("goals")), ""]
    if sec("streams"):
        md += ["## Default paths file-to-file over streams and block size (medians, min-max)\n", table(sec("streams")), ""]
    if sec("send"):
        md += ["## Send paths into the discard sink (page cache warm)\n", table(sec("send"), "iperf3 -Z -F FILE"), ""]
    if sec("recv"):
        md += ["## Receive paths into files, from the fastest sender\n", table(sec("recv")), ""]
    if sec("combo"):
        md += ["## Every combination (default stream count)\n", table(sec("combo"), "nc -> file"), ""]
    if sec("cold"):
        md += ["## Cold cache (drop_caches before each run)\n", table(sec("cold")), ""]
    if sec("memory"):
        md += ["## Peak RSS of default file-to-file transfers over streams x block size\n", memory_table(sec("memory")), ""]
    if sec("trace"):
        md += ["## CPU copies per byte (`sluice trace`, each side traced separately)\n", trace_table(sec("trace")), ""]
    (out / "results.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    try:
        plot(res, out / "data-paths.png")
    except ImportError:
        print("report: matplotlib missing: no plot", file=sys.stderr)


def memory_table(rows):
    lines = ["| streams | block | MB/s | peak RSS MiB send | peak RSS MiB recv |", "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["streams"], int(r["block"][:-1]))):
        lines.append(f"| {r['streams']} | {r['block']} | {r['mb_s']:.0f} | {r['rss_send_kb'] / 1024:.1f} | {r['rss_recv_kb'] / 1024:.1f} |")
    return "\n".join(lines)


def trace_table(rows):
    lines = ["| run | trace copies/B send | trace copies/B recv | CPU copies/B send | CPU copies/B recv | CPU copies/B total "
             "| CPU s/GB send (traced) | CPU s/GB recv (traced) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['copies_send']:.2f} | {r['copies_recv']:.2f} | {r['cpu_copies_send']:.2f} | "
                     f"{r['cpu_copies_recv']:.2f} | {r['cpu_copies_send'] + r['cpu_copies_recv']:.2f} | "
                     f"{r['cpu_s_gb_send']:.3f} | {r['cpu_s_gb_recv']:.3f} |")
    return "\n".join(lines)


def plot(res, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, section, title in ((axes[0], "send", "send paths -> discard sink (warm cache)"),
                               (axes[1], "recv", "fastest sender -> receive paths (into files)")):
        g = group([r for r in res if r["section"] == section])
        names = sorted({k[0] for k in g})
        for name in names:
            pts = sorted((k[1], v["mb_s"]) for k, v in g.items() if k[0] == name)
            if len(pts) == 1:
                ax.axhline(pts[0][1], linestyle=":", color="gray")
                ax.annotate(name, (1, pts[0][1]), fontsize=8, color="gray")
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    linestyle="--" if not name.startswith("sluice") else "-", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8])
        ax.set_xticklabels(["1", "2", "4", "8"])
        ax.set_xlabel("TCP streams")
        ax.set_ylabel("MB/s (median)")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
