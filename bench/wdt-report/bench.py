#!/usr/bin/env python3
"""Runs the WDT-report bench: each data set moved by each tool between two network namespaces,
unbounded and rate-limited, with the link's iperf3 figure, whole-machine CPU, and a check of
every received tree against the source. Use bench/wdt-report/run (it installs the peers and
tears the test bed down on any exit); see bench/wdt-report/README.md."""
# Modules: procs.py (peers, namespaces, process waits), runs.py (Bench: one run), this file
# (options, data sets, the loop over links/sets/tools, summary and results).
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(BENCH, "datasets"))

import measure  # noqa: E402
import report  # noqa: E402
import verify  # noqa: E402
from procs import PEERS, Peer, background_busy, log, netns, parse_peer  # noqa: E402
from runs import Bench  # noqa: E402

BUILTIN = ["iperf3", "cp", "sluice", "wdt", "rsync", "tarnc", "lftp"]
SETS = ["large", "small", "minor", "mixed"]


def ensure_data(a, sets):
    gen = os.path.join(BENCH, "datasets", "gen.py")
    subprocess.run([sys.executable, gen, "--out", a.data, "--scale", a.scale, "--seed", str(a.seed),
                    "--sets", ",".join(sets)], check=True)
    out = {}
    for s in sets:
        with open(os.path.join(a.data, "manifests", f"{s}.json")) as f:
            out[s] = json.load(f)
    return out


def find_wdt(given):
    """The WDT binary: --wdt, else wdt on PATH, else bench/peers/wdt-build.sh's default prefix."""
    for c in ([given] if given else [shutil.which("wdt") or "", "/work/data/wdt/bin/wdt"]):
        if c and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return ""


def set_bytes_expected(name, scale):
    """The bytes a set will have at this scale (before generating it): for the disk check."""
    import fractions
    f = fractions.Fraction(scale)
    full = {"large": 16 * 2 * 2**30, "small": 4243 * (1024 + 10 * 2**20) // 2, "minor": 102645 * (1024 + 400 * 1024) // 2}
    full["mixed"] = full["small"] + full["minor"]
    return int(full[name] * f)


def mem_total_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def summarize(runs):
    """Median over repeated runs of each (link, set, tool); percentages against iperf3."""
    groups = {}
    for r in runs:
        groups.setdefault((r["link"], r["set"], r["tool"]), []).append(r)
    out = []
    for (link, set_name, tool), rs in groups.items():
        ok = [r for r in rs if r["ok"]]
        row = {"link": link, "set": set_name, "tool": tool, "runs": len(rs), "ok_runs": len(ok)}
        for k in ("mb_s", "files_s", "seconds", "cpu_s_per_gb", "cpu_proc_s_per_gb", "background_busy_frac",
                  "rss_send_mib", "rss_recv_mib"):
            vals = [r[k] for r in ok if r.get(k) is not None]
            row[k] = round(statistics.median(vals), 3) if vals else None
        paths = sorted({f"{r.get('stats_send', {}).get('send_path', '?')}/{r.get('stats_recv', {}).get('recv_path', '?')}"
                        for r in ok if "stats_send" in r or "stats_recv" in r})
        if paths:
            row["paths"] = paths  # sluice's reported send/recv data paths
        out.append(row)
    base = {(r["link"], r["set"]): r["mb_s"] for r in out if r["tool"] == "iperf3" and r["mb_s"]}
    for r in out:
        b = base.get((r["link"], r["set"]))
        on_link = r["tool"] != "cp"  # cp is a local reference, not on the link
        r["pct_iperf3"] = round(100 * r["mb_s"] / b, 1) if b and r["mb_s"] and on_link else None
    return out


def snapshot_sluice(a):
    """Copies the sluice binary to the work directory and runs that copy, so a rebuild in the
    work tree during the bench cannot swap it mid-run; records what was measured."""
    import hashlib
    os.makedirs(a.work, exist_ok=True)
    copy = os.path.join(a.work, "sluice")
    shutil.copy2(a.sluice, copy)
    with open(copy, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    info = {"binary": a.sluice, "sha256": digest,
            "mtime": datetime.datetime.fromtimestamp(os.stat(a.sluice).st_mtime).isoformat(timespec="seconds")}
    try:
        info["repo_head"] = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                           text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    a.sluice = copy
    log(f"sluice: measuring a copy of {info['binary']} ({info['mtime']}, sha256 {digest[:12]})")
    return info

def on_sigterm(*_):
    raise KeyboardInterrupt


def main():
    # SIGTERM unwinds like Ctrl-C: the finally below writes what was measured and tears down.
    signal.signal(signal.SIGTERM, on_sigterm)
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", default="1/16", help="data set scale (default 1/16; 1 = the report's sizes)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--tools", default=",".join(BUILTIN), help="built-in tools to run (default all)")
    ap.add_argument("--links", default="unbounded,1gbit", help="'unbounded' and/or tbf rates such as 1gbit")
    ap.add_argument("--runs", type=int, default=1, help="repeats per tool; the tables show medians")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before every run")
    ap.add_argument("--cache", default="",
                    help="cache states to run, each a row: warm, cold, or auto (cold always, warm too when "
                         "the set fits in half the memory); default: cold with --cold, else warm")
    ap.add_argument("--prefault-modes", default="",
                    help="on,off: run every tool with and without the prefault step (default: on, or off "
                         "with --no-prefault)")
    ap.add_argument("--one-set-at-a-time", choices=["auto", "yes", "no"], default="auto",
                    help="generate a set, run every tool on it, delete it, then the next: what fits the disk at "
                         "--scale 1 (auto: yes from scale 1/4 up)")
    ap.add_argument("--full", action="store_true",
                    help="the full-size preset: --scale 1 --cache auto --prefault-modes on,off "
                         "--one-set-at-a-time yes --links unbounded")
    ap.add_argument("--wdt", default="", help="WDT binary (default: wdt on PATH, else /work/data/wdt/bin/wdt; "
                    "bench/peers/wdt-build.sh builds it); the wdt tool is skipped when none is found")
    ap.add_argument("--timeout", type=float, default=0, help="per-transfer limit, s (default 60 + bytes/20 MB/s)")
    ap.add_argument("--no-prefault", dest="prefault", action="store_false",
                    help="do not write and free a scratch file of the set's size before each run "
                         "(see docs/bench-wdt-report.md: fresh memory is slow on this VM)")
    ap.add_argument("--wait-quiet", type=float, default=30,
                    help="before each run, wait up to this many s for the machine to be <5%% busy")
    ap.add_argument("--settle", type=float, default=1.0, help="pause before each run, s")
    ap.add_argument("--sluice", default=os.path.join(REPO, "build", "tools", "sluice"))
    ap.add_argument("--streams", type=int, default=0, help="sluice --streams (default 0: sluice's own default, auto)")
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=SEND|||RECV",
                    help="extra tool whose receiver exits by itself after one transfer")
    ap.add_argument("--peer-daemon", action="append", default=[], metavar="NAME=SEND|||RECV",
                    help="extra tool whose receiver keeps running (stopped after the sender exits)")
    ap.add_argument("--work", default="/tmp/sluice-bench", help="data sets and receive directory")
    ap.add_argument("--out", default="", help="results directory (default bench/out/wdt-report-DATE)")
    a = ap.parse_args()
    if a.full:
        a.scale, a.cache, a.prefault_modes, a.one_set_at_a_time = "1", a.cache or "auto", a.prefault_modes or "on,off", "yes"
        if a.links == "unbounded,1gbit":
            a.links = "unbounded"
    import fractions
    if a.one_set_at_a_time == "auto":
        a.one_set_at_a_time = "yes" if fractions.Fraction(a.scale) >= fractions.Fraction(1, 4) else "no"
    a.one_set = a.one_set_at_a_time == "yes"
    caches = [c for c in (a.cache or ("cold" if a.cold else "warm")).split(",") if c]
    if any(c not in ("warm", "cold", "auto") for c in caches):
        raise SystemExit(f"bench: --cache takes warm, cold, auto; got {a.cache!r}")
    pf_modes = [m == "on" for m in (a.prefault_modes or ("on" if a.prefault else "off")).split(",") if m]
    a.wdt = find_wdt(a.wdt)
    a.sluice = os.path.abspath(a.sluice)
    a.sluice_info = None
    tag = a.scale.replace("/", "_")
    a.data = os.path.join(a.work, f"data-{tag}-seed{a.seed}")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    a.out = os.path.abspath(a.out or os.path.join(REPO, "bench", "out", f"wdt-report-{stamp}"))
    os.makedirs(a.out, exist_ok=True)

    sets = [s for s in a.sets.split(",") if s]
    links = [x for x in a.links.split(",") if x]
    peers, skipped = [], []
    for t in [t for t in a.tools.split(",") if t]:
        if t not in BUILTIN:
            raise SystemExit(f"bench: unknown tool {t} (built in: {', '.join(BUILTIN)})")
        if t == "sluice" and not os.access(a.sluice, os.X_OK):
            msg = f"sluice binary {a.sluice} not found or not executable: skipping sluice"
            log(msg)
            skipped.append({"tool": "sluice", "reason": msg})
            continue
        if t == "sluice":
            a.sluice_info = snapshot_sluice(a)
        if t == "wdt" and not a.wdt:
            msg = "WDT not found (--wdt, PATH, /work/data/wdt/bin/wdt; bench/peers/wdt-build.sh builds it): skipping wdt"
            log(msg)
            skipped.append({"tool": "wdt", "reason": msg})
            continue
        peers.append(Peer(t, script=os.path.join(PEERS, f"{t}.sh")))
    peers += [parse_peer(s, True) for s in a.peer] + [parse_peer(s, False) for s in a.peer_daemon]
    if peers and peers[0].name != "iperf3" and any(p.name == "iperf3" for p in peers):
        peers.sort(key=lambda p: p.name != "iperf3")

    def prepare(names):
        got = ensure_data(a, names)
        for s, m in got.items():
            # The sources must equal their manifests (a broken source would fail every tool);
            # reading them also warms the page cache for the warm variant.
            t = time.monotonic()
            problems = verify.compare(m, a.data)
            if problems:
                raise SystemExit(f"bench: source set {s} differs from its manifest: {problems[0]}; "
                                 f"regenerate with bench/datasets/gen.py --force")
            log(f"source {s} checked in {time.monotonic() - t:.1f} s")
        return got

    manifests = {} if a.one_set else prepare(sets)
    b = Bench(a)
    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "kernel": platform.release(), "cpus": os.cpu_count(), "scale": a.scale, "seed": a.seed,
        "cold": a.cold, "caches": caches, "prefault_modes": pf_modes, "one_set_at_a_time": a.one_set,
        "wdt": a.wdt, "runs": a.runs, "prefault": a.prefault, "streams_sluice": a.streams, "sluice": a.sluice,
        "links": links, "command": " ".join(sys.argv), "sluice_build": a.sluice_info,
        "source_warmed": not a.cold, "damon_pageout": measure.damon_pageout(),
        "cpu_method": "whole machine: delta of /proc/stat busy jiffies (user+nice+system+irq+softirq) "
                      "over each transfer; cpu_proc = rusage (user+sys) of the started sender and "
                      "receiver and their reaped children",
        "mb": "10^6 bytes; time = sender start to the end of both sides (receivers that keep running: "
              "the sender's exit)",
        "testbed": b.ns,
    }
    log(f"measuring background CPU for 2 s")
    meta["background_busy_frac"] = background_busy()
    if meta["background_busy_frac"] > 0.05:
        log(f"WARNING: machine {100 * meta['background_busy_frac']:.0f}% busy before the bench; CPU figures include it")
    try:
        netns("up")
        # One set at a time: every link and tool on it, then its data goes (at --scale 1 the
        # sets and a received copy do not all fit on the disk at once).
        for s in sets:
            if a.one_set:
                need = 2 * set_bytes_expected(s, a.scale) + (2 << 30)
                free = shutil.disk_usage(os.path.dirname(a.data) or "/").free
                if free < need:
                    msg = (f"set {s} skipped: source + received copy need {need / 1e9:.1f} GB, "
                           f"{free / 1e9:.1f} GB free on {a.work}")
                    log(msg)
                    skipped.append({"set": s, "reason": msg})
                    continue
                manifests.update(prepare([s]))
            cache_rows = []
            for c in caches:
                if c == "auto":
                    cache_rows += [True] + ([False] if manifests[s]["bytes"] < mem_total_bytes() // 2 else [])
                else:
                    cache_rows.append(c == "cold")
            for link in links:
                netns("rate", "none" if link == "unbounded" else link)
                # Round robin: repeats interleave the tools, so slow drifts spread over all.
                for r in range(1, a.runs + 1):
                    for cold in dict.fromkeys(cache_rows):
                        for pf in pf_modes:
                            for p in peers:
                                b.one(link, s, manifests[s], p, r, cold=cold, prefault=pf)
            if a.one_set:
                b.trash.close()  # the received trees too: the next set is generated in their room
                shutil.rmtree(a.data, ignore_errors=True)  # mixed/ links into small/ and minor/: all of it
                log(f"set {s}: data deleted")
    finally:
        b.trash.close()
        netns("down")
        results = {"meta": meta, "skipped": skipped, "failures": b.failures,
                   "sets": {s: {"files": m["count"], "bytes": m["bytes"]} for s, m in manifests.items()},
                   "runs": b.runs, "summary": summarize(b.runs)}
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
        report.write(results, a.out)
        log(f"results: {a.out}/results.md, results.json, plot.png")
    if b.failures:
        log(f"{len(b.failures)} run(s) failed:")
        for x in b.failures:
            log(f"  {x}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted: partial results written, test bed torn down")
        sys.exit(130)
