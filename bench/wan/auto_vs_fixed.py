"""h16o (issue 16): per cell (RTT, tbf, loss) the runs of 4 fixed and auto, medians, ratio, auto's count and why; plot of the ratio."""
# usage: python3 bench/wan/auto_vs_fixed.py RESULTS_DIR [PLOT.png] [--files NAME=BUILD,...] [--title TEXT]: the
# markdown table of docs/benchmarks.md from run.py --streams 4,auto --alternate rows in RESULTS_DIR/NAME.jsonl, and its
# plot (matplotlib). Without --files: h16o's W20a..W150d (a file without rate_mbit rows: 100 Mbit/s at 0% loss, else 600).
import argparse, json, re, statistics as st
from collections import defaultdict
ap = argparse.ArgumentParser()
ap.add_argument("results")
ap.add_argument("plot", nargs="?")
ap.add_argument("--files", help="NAME=BUILD,...: the results files (NAME.jsonl) and the build each ran")
ap.add_argument("--title", default="main b2b9f7b; o2 = this branch")
a = ap.parse_args()
files = {"W20a": (600, "main"), "W20b": (None, "main"), "W150a": (600, "main"), "W150b": (None, "main"), "W150c": (100, "o2"), "W20d": (None, "o2"), "W150d": (None, "o2")}
if a.files:
    files = {n: (None, b) for n, b in (f.split("=", 1) for f in a.files.split(","))}
cells = defaultdict(lambda: defaultdict(list))
for f, (rate, build) in files.items():
    try:
        rows = [json.loads(l) for l in open(f"{a.results}/{f}.jsonl") if l.strip()]
    except FileNotFoundError:
        continue
    for r in rows:
        rt = r.get("rate_mbit") or rate or (100 if r["loss_pct"] == 0 else 600)
        cells[(r["rtt_ms"], rt, r["loss_pct"], build)][str(r["streams"])].append(r)

def why(r):
    if r.get("streams_choice"):
        return r["streams_choice"]
    for l in r.get("auto", []):
        m = re.search(r"streams auto: (\d+) of 16 streams \((.*?)\); measured", l)
        if m:
            return m.group(1) + ": " + m.group(2)
    return "?"

def short(w):
    m = re.match(r"(\d+): (.*)", w)
    if not m: return w
    n, text = m.groups()
    x = re.match(r"(\d+) streams gave (\d+%) more than (\d+), within the noise between one count's periods \((\d+%)\)", text)
    if x:
        return f"{n} ({x.group(1)} gave {x.group(2)} more, within {x.group(4)} noise)"
    if "bottleneck is full" in text:
        x = re.search(r"stands at ([\d.]+)x", text)
        return f"{n} (full, RTT {x.group(1)}x)"
    return f"{n} ({text[:60]})"

out = []
ratios = {}
for k in sorted(cells):
    rtt, rate, loss, build = k
    c = cells[k]
    g = {n: [r["goodput_mbit"] for r in c[n] if r.get("goodput_mbit")] for n in ("4", "auto")}
    rt = {n: [r["retrans_pct"] for r in c[n] if r.get("goodput_mbit")] for n in ("4", "auto")}
    if not g["4"] or not g["auto"]:
        continue
    m4, ma = st.median(g["4"]), st.median(g["auto"])
    ratios[k] = (ma / m4, [x / m4 for x in g["auto"]])
    counts = "; ".join(short(why(r)) for r in c["auto"])
    out.append(f"| {rtt:g} | {rate:g} | {loss:g} | {build} | " + ", ".join(f"{x:.1f}" for x in g["4"]) + f" ({', '.join(f'{x:.2f}' for x in rt['4'])}%) | "
               + ", ".join(f"{x:.1f}" for x in g["auto"]) + f" ({', '.join(f'{x:.2f}' for x in rt['auto'])}%) | **{ma/m4:.2f}** | {counts} |")
print("| RTT ms | tbf Mbit/s | loss % | build | 4 fixed: Mbit/s (resent) | auto: Mbit/s (resent) | auto / 4 (medians) | auto's count (why) |")
print("|---|---|---|---|---|---|---|---|")
print("\n".join(out))
if a.plot:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 4.5))
    labels = []
    xs = 0
    for rtt, color in ((20, "tab:blue"), (150, "tab:red")):
        for k in sorted(ratios, key=lambda k: (k[1], k[2], k[3])):
            if k[0] != rtt: continue
            _, rate, loss, build = k
            med, per = ratios[k]
            ax.bar(xs, med, color=color, alpha=0.5, label=f"{rtt} ms (median)" if not any(l.startswith(f"{rtt} ms") for l in labels) else None)
            ax.plot([xs] * len(per), per, "k.", ms=6)
            labels.append(f"{rtt} ms\n{rate:g}M {loss:g}%\n{build}")
            xs += 1
    ax.axhline(1.0, color="gray", lw=1)
    ax.axhline(0.95, color="gray", lw=1, ls="--")
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylabel("auto / 4 fixed (goodput)")
    every = [x for _, per in ratios.values() for x in per]
    ax.set_ylim(min(0.4, min(every) - 0.05), max(1.25, max(every) + 0.1))
    ax.set_title(f"--streams auto against 4 fixed streams, same build each ({a.title}), bbr, bench/wan; dots: each auto run / 4's median")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.plot, dpi=110)
