#!/usr/bin/env python3
"""Cost against size (issue 19): the WDT report's minor set (1-400 KiB files) at several scales,
moved over loopback by each tool, cold cache, into a fresh directory every run. Per run:
files/s, MB/s, CPU s/GB per side and for the whole machine, peak RSS per side. The goal is a
flat line: a tool whose cost per file and per byte holds when the set outgrows memory.

  flock /run/sluice-bench.lock bench/cost-vs-size/run.py [--scales 1/64,1/16,1/4,1] [--runs 2]
      [--tools sluice,wdt,rsync] [--data /work/data/cost-vs-size] [--data-for 1=/work/data/sets-full]
      [--out bench/out/cost-vs-size-DATE]
  /usr/bin/python3 bench/cost-vs-size/plot.py OUT        # OUT/plot.png from OUT/results.json

Tools are the peer scripts in bench/peers/ (same interface as the wdt-report bench), run here
between two processes on 127.0.0.1 (no namespaces, no rate limit). Each side runs under GNU
time (user, system, peak RSS of that side). Data sets come from bench/datasets/gen.py into
DATA/scale-N_D/ (or an existing tree named with --data-for SCALE=DIR, DIR/minor being the set)
and are checked against their manifest once, before the first run at that scale.
"""
import argparse
import datetime
import fractions
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, os.path.join(BENCH, "wdt-report"))
sys.path.insert(0, os.path.join(BENCH, "datasets"))
import measure  # noqa: E402
import verify  # noqa: E402

TIME = shutil.which("time", path="/usr/bin:/bin")
SET = "minor"  # --set changes it: the full-size figures of the other wdt-report sets (issue 19)


def log(msg):
    print(f"cost-vs-size: {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, deadline):
    while time.monotonic() < deadline and not proc.done():
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def read_time(path):
    """GNU time's '%U %S %M' line: user s, system s, peak RSS KiB (None when absent)."""
    try:
        with open(path) as f:
            lines = [x.split() for x in f if x.strip()]
        u, s_, m = lines[-1]
        return float(u), float(s_), int(m)
    except (OSError, ValueError, IndexError):
        return None


def stop_children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return
    for k in kids:
        try:
            os.kill(k, signal.SIGTERM)
        except ProcessLookupError:
            pass


def data_for(a, scale):
    if scale in a.data_for:
        root = a.data_for[scale]
    else:
        root = os.path.join(a.data, "scale-" + scale.replace("/", "_"))
        subprocess.run([sys.executable, os.path.join(BENCH, "datasets", "gen.py"), "--out", root, "--sets", SET,
                        "--scale", scale], check=True)
    with open(os.path.join(root, "manifests", f"{SET}.json")) as f:
        manifest = json.load(f)
    t = time.monotonic()
    problems = verify.compare(manifest, root) if a.check_source else []
    if problems:
        raise SystemExit(f"cost-vs-size: {root}/{SET} differs from its manifest: {problems[0]}")
    log(f"scale {scale}: {manifest['count']:,} files, {manifest['bytes'] / 1e9:.2f} GB, checked in "
        f"{time.monotonic() - t:.0f} s")
    return root, manifest


def one(a, tool, scale, root, manifest, run_no, rx):
    script = os.path.join(BENCH, "peers", f"{tool}.sh")
    kind = dict(kv.split("=") for kv in subprocess.run([script, "kind"], capture_output=True, text=True,
                                                         check=True).stdout.split())
    tag = f"{scale.replace('/', '_')}-{tool}-{run_no}"
    dst = os.path.join(rx, f"dst-{os.getpid()}-{tag}")
    os.makedirs(dst)
    work = os.path.join(a.out, "work", tag)
    os.makedirs(work, exist_ok=True)
    port = free_port()
    logs = os.path.join(a.out, "logs")
    lg = lambda side, s: os.path.join(logs, f"{tag}.{side}.{s}")  # noqa: E731
    timed = lambda side: [TIME, "-f", "%U %S %M", "-o", lg(side, "time")]  # noqa: E731
    env = dict(os.environ, SB_WORK=work, SB_DST=dst, SB_BYTES=str(manifest["bytes"]), SB_TOKEN=f"cvs{port}",
               SB_SET=SET, SB_SRC=os.path.join(root, SET), SB_SLUICE=a.sluice)
    if a.streams:
        env["SB_STREAMS"] = str(a.streams)
    rec = {"tool": tool, "scale": scale, "run": run_no, "files": manifest["count"], "bytes": manifest["bytes"],
           "ok": False}
    # Every tool starts alike: caches dropped after the previous run's writes are on disk, in a
    # receive directory never used before (under a TOPDIR parent), and no tree deleted in ext4's
    # recently-deleted window (measure.Trash; docs/bench-wdt-report.md).
    waited = a.trash.settle()
    if waited:
        log(f"{tag}: waited {waited:.0f} s after deleting the previous tree (ext4's recently-deleted window)")
    os.sync()
    measure.drop_caches()
    recv = send = None
    timeout = 120 + manifest["bytes"] / 20e6
    try:
        recv = measure.Proc(timed("recv") + [script, "recv", dst, "127.0.0.1", str(port)], lg("recv", "out"),
                            lg("recv", "err"), env=env, cwd=REPO)
        url = []
        if kind["url"] == "1":
            line = recv.first_line(time.monotonic() + 30)
            if not line:
                raise RuntimeError("receiver printed no URL")
            url = [line]
        elif not wait_port(port, recv, time.monotonic() + 30):
            raise RuntimeError(f"receiver not listening (rc={recv.rc})")
        busy0, t0 = measure.machine_busy_s(), time.monotonic()
        send = measure.Proc(timed("send") + [script, "send", os.path.join(root, SET), "127.0.0.1", str(port)] + url,
                            lg("send", "out"), lg("send", "err"), env=env, cwd=REPO)
        if not send.wait(t0 + timeout):
            raise RuntimeError("timeout (sender)")
        if send.rc != 0:
            raise RuntimeError(f"sender failed rc={send.rc}")
        if kind["exits"] == "1":
            if not recv.wait(t0 + timeout):
                raise RuntimeError("timeout (receiver)")
            t1 = max(send.end, recv.end)
        else:
            t1 = send.end
            time.sleep(0.3)
            stop_children(recv.p.pid)
            recv.wait(time.monotonic() + 5)
        busy1 = measure.machine_busy_s()
        if kind["exits"] == "1" and recv.rc != 0:
            raise RuntimeError(f"receiver failed rc={recv.rc}")
        secs = t1 - t0
        gb = manifest["bytes"] / 1e9
        rec.update(seconds=round(secs, 3), mb_s=round(manifest["bytes"] / 1e6 / secs, 1),
                   files_s=round(manifest["count"] / secs, 1),
                   cpu_machine_s_per_gb=round((busy1 - busy0) / gb, 3))
        for side in ("send", "recv"):
            t = read_time(lg(side, "time"))
            if t:
                rec[f"cpu_{side}_s_per_gb"] = round((t[0] + t[1]) / gb, 3)
                rec[f"sys_{side}_s"] = t[1]
                rec[f"rss_{side}_mib"] = round(t[2] / 1024, 1)
        if a.verify:
            problems = verify.compare(manifest, dst)
            if problems:
                raise RuntimeError("received tree differs: " + "; ".join(problems[:3]))
            rec["verified"] = True
        rec["ok"] = True
    except (RuntimeError, OSError) as e:
        rec["error"] = str(e)
        log(f"FAIL {tag}: {e} (logs {lg('*', '*')})")
    finally:
        for p in (send, recv):
            if p:
                p.close()
        a.trash.put(dst, manifest["bytes"])
        shutil.rmtree(work, ignore_errors=True)
    if rec["ok"]:
        log(f"{tag}: {rec['files_s']:,.0f} files/s, {rec['mb_s']} MB/s, CPU s/GB send {rec.get('cpu_send_s_per_gb')} "
            f"recv {rec.get('cpu_recv_s_per_gb')} machine {rec['cpu_machine_s_per_gb']}, RSS MiB send "
            f"{rec.get('rss_send_mib')} recv {rec.get('rss_recv_mib')}")
    return rec


def could_not_bind(a, tool, scale, run_no):
    """Whether the receiver of that run failed to bind its ports: WDT listens on the chosen
    port and the next streams - 1, and free_port() checks only the first."""
    tag = f"{scale.replace('/', '_')}-{tool}-{run_no}"
    try:
        with open(os.path.join(a.out, "logs", f"{tag}.recv.err"), errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    return "could not bind" in text.lower()


def one_bound(a, tool, scale, root, manifest, run_no, rx, tries=3):
    """one(), run again on new ports (at most `tries` times in all) when its receiver could not
    bind them: a port clash is not the tool's result. Every attempt is said in the log and the
    record counts them (`bind_retries`)."""
    for attempt in range(tries):
        rec = one(a, tool, scale, root, manifest, run_no, rx)
        if rec["ok"] or not could_not_bind(a, tool, scale, run_no):
            break
        log(f"{tool} run {run_no}: the receiver could not bind its ports; again on new ports")
    rec["bind_retries"] = attempt
    return rec


def summarize(runs):
    out = []
    keys = ("files_s", "mb_s", "cpu_send_s_per_gb", "cpu_recv_s_per_gb", "cpu_machine_s_per_gb", "rss_send_mib",
            "rss_recv_mib")
    for (tool, scale) in dict.fromkeys((r["tool"], r["scale"]) for r in runs):
        ok = [r for r in runs if r["tool"] == tool and r["scale"] == scale and r["ok"]]
        row = {"tool": tool, "scale": scale, "files": ok[0]["files"] if ok else None, "ok_runs": len(ok)}
        for k in keys:
            vals = [r[k] for r in ok if r.get(k) is not None]
            row[k] = round(statistics.median(vals), 3) if vals else None
        out.append(row)
    return out


def markdown(results):
    lines = [f"# Cost against size, {SET} set, {results['meta']['date']}", "",
             "Cold cache, loopback, fresh receive directory per run, medians of "
             f"{results['meta']['runs']} run(s). CPU s/GB per side: user + system of that side (GNU time); "
             "machine: /proc/stat busy time over the transfer. RSS: peak of each side's process.", "",
             "| tool | scale | files | files/s | MB/s | CPU s/GB send | recv | machine | peak RSS MiB send | recv |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    f = lambda x, nd=2: "-" if x is None else f"{x:,.{nd}f}"  # noqa: E731
    for r in results["summary"]:
        lines.append(f"| {r['tool']} | {r['scale']} | {r['files'] or 0:,} | {f(r['files_s'], 0)} | {f(r['mb_s'], 0)} | "
                     f"{f(r['cpu_send_s_per_gb'])} | {f(r['cpu_recv_s_per_gb'])} | {f(r['cpu_machine_s_per_gb'])} | "
                     f"{f(r['rss_send_mib'], 0)} | {f(r['rss_recv_mib'], 0)} |")
    lines += ["", f"Command: `{results['meta']['command']}`", ""]
    return "\n".join(lines)


def main():
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", default="1/64,1/16,1/4,1")
    ap.add_argument("--tools", default="sluice,wdt,rsync")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--streams", type=int, default=0, help="SB_STREAMS for every tool (default: each tool's own)")
    ap.add_argument("--sluice", default=os.path.join(REPO, "build", "tools", "sluice"))
    ap.add_argument("--data", default="/work/data/cost-vs-size", help="where generated sets go")
    ap.add_argument("--data-for", action="append", default=[], metavar="SCALE=DIR",
                    help="use an existing tree for a scale (DIR/minor and DIR/manifests/minor.json)")
    ap.add_argument("--rx", default="/work/data/cost-vs-size-rx", help="receive directories' parent (TOPDIR)")
    ap.add_argument("--no-verify", dest="verify", action="store_false", help="skip the received-tree check")
    ap.add_argument("--out", default="")
    ap.add_argument("--set", default="minor", choices=["minor", "small", "large", "mixed"],
                    help="the wdt-report set to move (default minor)")
    ap.add_argument("--delete-quiet", type=float, default=40.0, metavar="S",
                    help="when the disk cannot keep a received tree until the end, delete it and start the "
                         "next run S seconds later (ext4's recently-deleted window; default 40)")
    ap.add_argument("--keep-at-most", type=float, default=float("inf"), metavar="GB",
                    help="keep at most this many GB of received trees until the end (default: what the disk holds)")
    ap.add_argument("--no-check-source", dest="check_source", action="store_false",
                    help="skip the source check (a call after the first on the same tree: it reads the whole set)")
    a = ap.parse_args()
    global SET
    SET = a.set
    if not TIME:
        raise SystemExit("cost-vs-size: needs GNU time (/usr/bin/time; Debian package 'time')")
    a.data_for = dict(x.split("=", 1) for x in a.data_for)
    a.trash = measure.Trash(quiet_s=a.delete_quiet, keep_bytes=a.keep_at_most * 1e9)
    for s in a.scales.split(","):
        fractions.Fraction(s)  # refuse a malformed scale before any work
    a.sluice = os.path.abspath(a.sluice)
    # A copy: the work tree may be rebuilt while this runs.
    os.makedirs(a.data, exist_ok=True)
    copy = os.path.join(a.data, "sluice")
    shutil.copy2(a.sluice, copy)
    a.sluice = copy
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    a.out = os.path.abspath(a.out or os.path.join(REPO, "bench", "out", f"cost-vs-size-{stamp}"))
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    os.makedirs(a.rx, exist_ok=True)
    subprocess.run(["chattr", "+T", a.rx], capture_output=True)
    tools = [t for t in a.tools.split(",") if t]
    if "wdt" in tools and not (shutil.which("wdt") or os.access("/work/data/wdt/bin/wdt", os.X_OK)
                               or os.environ.get("SB_WDT")):
        log("WDT not found (bench/peers/wdt-build.sh builds it): skipping wdt")
        tools.remove("wdt")
    results = {"meta": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "command": " ".join(sys.argv),
                        "runs": a.runs, "set": SET, "tools": tools, "scales": a.scales.split(","), "kernel": os.uname().release},
               "runs": []}
    try:
        for scale in a.scales.split(","):
            root, manifest = data_for(a, scale)
            for r in range(1, a.runs + 1):
                for t in tools:  # round robin: drifts spread over all tools
                    results["runs"].append(one_bound(a, t, scale, root, manifest, r, a.rx))
    finally:
        a.trash.close()
        results["summary"] = summarize(results["runs"])
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
        with open(os.path.join(a.out, "results.md"), "w") as f:
            f.write(markdown(results))
        log(f"results: {a.out}/results.md, results.json; plot: /usr/bin/python3 {HERE}/plot.py {a.out}")
    return 0 if all(r["ok"] for r in results["runs"]) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted: partial results written")
        sys.exit(130)
