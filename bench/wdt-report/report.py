#!/usr/bin/env python3
"""Turns results.json into results.md (tables per link) and plot.png (grouped bars).

  report.py RESULTS_DIR      # rewrites RESULTS_DIR/results.md and plot.png
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SET_ORDER = ["large", "small", "minor", "mixed"]
BUSY = 0.05  # background CPU share before a run above which its machine CPU figure is flagged


def recorded():
    with open(os.path.join(HERE, "recorded.json")) as f:
        return json.load(f)


def fmt(x, nd=1):
    if x is None:
        return "-"
    return f"{x:,.{nd}f}"


def link_order(results):
    """Row groups: the links, each with its cache / prefault variants (labels such as
    "unbounded, cold, no prefault"), in the order they ran."""
    seen = []
    for r in results["runs"] or results["summary"]:
        if r["link"] not in seen:
            seen.append(r["link"])
    return seen or results["meta"].get("links") or []


def tool_order(summary):
    seen = []
    for r in summary:
        if r["tool"] not in seen:
            seen.append(r["tool"])
    return seen


def markdown(results):
    m = results["meta"]
    rec = recorded()
    wdt_here = rec["here_unbounded_1_16"]["WDT (recorded)"]
    lines = [
        f"# WDT-report bench, {m['date']}",
        "",
        f"Scale {m['scale']} (seed {m['seed']}), {'cold' if m['cold'] else 'warm'} page cache (unless a row group says otherwise), "
        f"{m['runs']} run(s) per tool (medians), memory {'prefaulted' if m.get('prefault') else 'not prefaulted'} (unless the row group says 'no prefault'){' and source set read' if m.get('source_warmed') else ''} before each run, kernel {m['kernel']}, {m['cpus']} CPUs; "
        f"machine {100 * m['background_busy_frac']:.1f}% busy before the bench.",
        "",
        "| set | files | bytes |", "|---|---:|---:|",
    ]
    for s in SET_ORDER:
        if s in results["sets"]:
            d = results["sets"][s]
            lines.append(f"| {s} | {d['files']:,} | {d['bytes'] / 2**30:.2f} GiB |")
    lines += ["", "MB = 10^6 bytes. CPU s/GB: " + m["cpu_method"] + ". Issue 5 states its CPU goals for "
              "the whole machine (both namespaces); the tool-process column is the one to compare while other "
              "sessions share the machine. A * marks a machine figure taken "
              f"while the machine was more than {100 * BUSY:.0f}% busy with something else just before the "
              "run (other work on the machine inflates it; the procs figure does not see it).", ""]
    summary = results["summary"]
    tools = tool_order(summary)
    for link in link_order(results):
        rows = [r for r in summary if r["link"] == link]
        if not rows:
            continue
        lines += [f"## {link}", "",
                  "| set | tool | MB/s | files/s | CPU s/GB, whole machine | CPU s/GB, tool processes | % of iperf3 "
                  "| peak RSS MiB send / recv |" + (" vs WDT recorded |" if link == "unbounded" else ""),
                  "|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if link == "unbounded" else "")]
        for s in SET_ORDER:
            for t in tools:
                r = next((x for x in rows if x["set"] == s and x["tool"] == t), None)
                if not r:
                    continue
                ok = "" if r["ok_runs"] == r["runs"] else f" ({r['runs'] - r['ok_runs']} of {r['runs']} failed)"
                if r.get("paths"):
                    ok += f" ({', '.join(r['paths'])})"
                busy = (r.get("background_busy_frac") or 0) > BUSY
                line = (f"| {s} | {t}{ok} | {fmt(r['mb_s'])} | {fmt(r['files_s'], 0)} | "
                        f"{fmt(r['cpu_s_per_gb'], 2)}{' *' if busy else ''} | {fmt(r['cpu_proc_s_per_gb'], 2)} | {fmt(r['pct_iperf3'])} | "
                        f"{fmt(r.get('rss_send_mib'), 0)} / {fmt(r.get('rss_recv_mib'), 0)} |")
                if link == "unbounded":
                    w = wdt_here.get(s)
                    line += f" {fmt(100 * r['mb_s'] / w[0]) + '%' if w and r['mb_s'] else '-'} |"
                lines.append(line)
        lines.append("")
    lines += ["## Recorded figures (not measured by this run)", "",
              "WDT on this machine (shared/notes/peers.md, 1/16 scale, unbounded veth, 8 streams, no encryption), "
              "MB/s (CPU s/GB): " + ", ".join(f"{s} {v[0]:,} ({v[1]})" for s, v in wdt_here.items()) + ".",
              "The published report at 1 Gbit/s, full size: WDT " +
              ", ".join(f"{s} {v}" for s, v in rec["report_1gbit_full"]["WDT (report)"].items()) +
              " MB/s; lftp " + ", ".join(f"{s} {v}" for s, v in rec["report_1gbit_full"]["lftp (report)"].items()) +
              " MB/s.", ""]
    if results.get("skipped"):
        lines += ["Skipped: " + "; ".join(f"{x.get('tool') or x.get('set')}: {x['reason']}" for x in results["skipped"]), ""]
    if results.get("failures"):
        lines += ["Failed runs:", ""] + [f"- {f}" for f in results["failures"]] + [""]
    if m.get("sluice_build"):
        sb = m["sluice_build"]
        lines += [f"sluice measured: {sb['binary']} built {sb['mtime']}, sha256 {sb['sha256'][:16]}, "
                  f"repository at {sb.get('repo_head', '?')}.", ""]
    lines += [f"Command: `{m['command']}`", ""]
    return "\n".join(lines)


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = results["summary"]
    links = [x for x in link_order(results) if any(r["link"] == x for r in summary)]
    tools = tool_order(summary)
    rec = recorded()
    sets = [s for s in SET_ORDER if s in results["sets"]]
    if not links or not sets:
        return  # nothing measured (e.g. stopped before the first run)
    handles = {}
    fig, axes = plt.subplots(len(links), 3, figsize=(18, 4.2 * len(links)), squeeze=False)
    for i, link in enumerate(links):
        extra = {}
        if link == "unbounded" and results["meta"]["scale"] in ("1/16", "0.0625") and not any(t == "wdt" for t in tools):
            extra = {"WDT (recorded)": {s: v[0] for s, v in rec["here_unbounded_1_16"]["WDT (recorded)"].items()}}
        # cp is a local reference: off the link, it would only squash the rate-limited bars.
        series = [t for t in tools if link == "unbounded" or t != "cp"] + list(extra)
        width = 0.8 / max(1, len(series))
        panels = (("mb_s", "MB/s"), ("cpu_s_per_gb", "CPU s/GB (whole machine)"),
                  ("cpu_proc_s_per_gb", "CPU s/GB (tool processes)"))
        for j, (key, ylabel) in enumerate(panels):
            ax = axes[i][j]
            for k, t in enumerate(series):
                vals = []
                for s in sets:
                    if t in extra:
                        if key == "mb_s":
                            vals.append(extra[t].get(s, 0))
                        elif key == "cpu_s_per_gb":
                            vals.append(rec["here_unbounded_1_16"]["WDT (recorded)"].get(s, [0, 0])[1])
                        else:
                            vals.append(0)
                    else:
                        r = next((x for x in summary if x["link"] == link and x["set"] == s and x["tool"] == t), None)
                        vals.append((r or {}).get(key) or 0)
                xs = [n + (k - (len(series) - 1) / 2) * width for n in range(len(sets))]
                color = f"C{tools.index(t)}" if t in tools else f"C{len(tools) + list(extra).index(t)}"
                bar = ax.bar(xs, vals, width, label=t, color=color, hatch="//" if t in extra else None,
                             alpha=0.6 if t in extra else 1.0)
                handles.setdefault(t, bar)
            ax.set_xticks(range(len(sets)))
            ax.set_xticklabels(sets)
            ax.set_ylabel(ylabel)
            ax.set_title(f"{link}: {ylabel}")
            ax.grid(axis="y", alpha=0.3)
    m = results["meta"]
    fig.suptitle(f"WDT-report data sets, scale {m['scale']}, {'cold' if m['cold'] else 'warm'} cache ({m['date']})")
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=len(handles), fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results, out_dir):
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(markdown(results))
    try:
        plot(results, os.path.join(out_dir, "plot.png"))
    except ImportError as e:
        print(f"report: no plot ({e}); run bench/peers/setup", file=sys.stderr)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(os.path.join(sys.argv[1], "results.json")) as f:
        write(json.load(f), sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
