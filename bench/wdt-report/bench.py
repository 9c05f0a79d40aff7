#!/usr/bin/env python3
"""Runs the WDT-report bench: each data set moved by each tool between two network namespaces,
unbounded and rate-limited, with the link's iperf3 figure, whole-machine CPU, and a check of
every received tree against the source. Use bench/wdt-report/run (it installs the peers and
tears the test bed down on any exit); see bench/wdt-report/README.md."""
import argparse
import datetime
import json
import os
import platform
import select
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

NETNS = os.path.join(BENCH, "testbed", "netns.sh")
PEERS = os.path.join(BENCH, "peers")
QUIET = 0.05  # background CPU share below which the machine counts as quiet
BUILTIN = ["iperf3", "cp", "sluice", "rsync", "tarnc", "lftp"]
SETS = ["large", "small", "minor", "mixed"]


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def netns(*args):
    subprocess.run([NETNS, *args], check=True, timeout=60)


def netns_env():
    out = subprocess.run([NETNS, "env"], capture_output=True, text=True, check=True).stdout
    return dict(kv.split("=", 1) for kv in out.split())


class Peer:
    """How to run one tool: a script in bench/peers/ or a --peer command pair."""

    def __init__(self, name, script=None, send=None, recv=None, exits=True):
        self.name, self.script, self.send_t, self.recv_t = name, script, send, recv
        if script:
            kind = subprocess.run([script, "kind"], capture_output=True, text=True, check=True).stdout
            k = dict(kv.split("=") for kv in kind.split())
            self.exits, self.url, self.tree = k["exits"] == "1", k["url"] == "1", k["tree"] == "1"
            self.local = k.get("local") == "1"  # no receiver, no network: a reference
        else:
            self.exits, self.url, self.tree, self.local = exits, "{url}" in send, True, False

    def _fill(self, t, v):
        for k, val in v.items():
            t = t.replace("{" + k + "}", str(val))
        return t

    def recv_argv(self, v):
        if self.script:
            return [self.script, "recv", v["dst"], v["host"], str(v["port"])]
        return ["bash", "-c", self._fill(self.recv_t, v)]

    def send_argv(self, v):
        if self.script:
            argv = [self.script, "send", v["src"], v["host"], str(v["port"])]
            return argv + ([v["url"]] if self.url else [])
        return ["bash", "-c", self._fill(self.send_t, v)]


def parse_peer(spec, exits):
    name, sep, cmds = spec.partition("=")
    send, sep2, recv = cmds.partition("|||")
    if not sep or not sep2 or not name or not send.strip() or not recv.strip():
        raise SystemExit(f"bench: --peer wants NAME=SEND_CMD|||RECV_CMD, got {spec!r}")
    return Peer(name, send=send.strip(), recv=recv.strip(), exits=exits)


def wait_all(procs, deadline):
    """Waits until every proc has exited or the deadline passed; True when all exited."""
    while True:
        live = [p for p in procs if not p.done()]
        if not live:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        select.select([p.pidfd for p in live], [], [], left)


def wait_first_failure_or_sender(send, recv, deadline):
    """Waits for the sender; returns early if the receiver fails first."""
    while not send.done():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if recv.done() and recv.rc != 0:
            return True
        select.select([send.pidfd] + ([] if recv.done() else [recv.pidfd]), [], [], left)
    return True


def kill_leftovers(ns_names):
    for ns in ns_names:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass


class Bench:
    def __init__(self, a):
        self.a = a
        self.ns = netns_env()
        self.port = 20000
        self.runs = []
        self.failures = []
        # Receive directories: a fresh name per run under a parent marked TOPDIR (see clean_dst).
        self.rx = os.path.join(a.work, "rx")
        self.rx_count = 0
        self.dst = os.path.join(self.rx, "dst")
        self.tmp = os.path.join(a.work, "tmp")
        self.logs = os.path.join(a.out, "logs")
        os.makedirs(self.logs, exist_ok=True)

    def clean_dst(self):
        # Every run receives into a directory it has never used, under a parent flagged TOPDIR
        # (chattr +T), so ext4's Orlov allocator places it, by a hash of its name, in a block
        # group of its own. Otherwise the run would create its inodes where the previous run's
        # tree (or other work in /tmp) was deleted seconds before; on this journal-less ext4 the
        # allocator then skips each recently deleted inode (ext4 recently_deleted()) on every
        # create: 6,400 creates took 2.8 s of CPU there against 0.14 s in a fresh group, for
        # every tool alike. docs/bench-wdt-report.md, "What limits figures".
        shutil.rmtree(self.dst, ignore_errors=True)
        if not self.rx_count:
            os.makedirs(self.rx, exist_ok=True)
            r = subprocess.run(["chattr", "+T", self.rx], capture_output=True, text=True)
            if r.returncode != 0:
                log(f"note: chattr +T {self.rx} failed ({r.stderr.strip()}): receive trees may land "
                    "where earlier ones were deleted")
        self.rx_count += 1
        self.dst = os.path.join(self.rx, f"dst-{os.getpid()}-{self.rx_count}")
        os.makedirs(self.dst)
        shutil.rmtree(self.tmp, ignore_errors=True)
        os.makedirs(self.tmp)

    def one(self, link, set_name, manifest, peer, run_no):
        a = self.a
        self.port += 1
        tag = f"{link}-{set_name}-{peer.name}-{run_no}"
        self.clean_dst()
        os.sync()
        if a.cold:
            measure.drop_caches()
        # The settle pause doubles as a sample of what else the machine is doing: the CPU
        # figures are whole-machine, so a run started on a busy machine is flagged.
        bg = background_busy(a.settle) if a.settle > 0 else None
        waited, limit = 0.0, a.wait_quiet
        while bg is not None and bg > QUIET and waited < limit:
            # Other work on this (shared) machine: wait, bounded, for a quiet second.
            bg = background_busy(1.0)
            waited += 1.0
        if waited:
            log(f"waited {waited:.0f} s for a quiet machine (now {100 * bg:.0f}% busy)")
        if not a.cold:
            # Warm means warm for every tool: see measure.warm_source (this VM pages out idle
            # page cache after ~30 s).
            measure.warm_source(os.path.join(a.data, set_name))
        if a.prefault:
            # dst pages, plus the sender's page cache when it has just been dropped.
            measure.prefault(os.path.join(a.work, "prefault.tmp"),
                             manifest["bytes"] * (2 if a.cold else 1) + (256 << 20))
        v = {"src": os.path.join(a.data, set_name), "dst": self.dst, "set": set_name,
             "host": self.ns["IP_RCV"], "port": self.port, "bytes": manifest["bytes"],
             "work": self.tmp, "url": ""}
        env = dict(os.environ, SB_WORK=self.tmp, SB_DST=self.dst, SB_BYTES=str(manifest["bytes"]),
                   SB_SLUICE=a.sluice, SB_TOKEN=f"bench{self.port}")
        if a.streams:
            env["SB_STREAMS"] = str(a.streams)
        timeout = a.timeout or (60 + manifest["bytes"] / 20e6)
        rec = {"link": link, "set": set_name, "tool": peer.name, "run": run_no, "ok": False,
               "bytes": manifest["bytes"], "files": manifest["count"] if peer.tree else 0,
               "timeout_s": round(timeout, 1), "port": self.port, "background_busy_frac": bg,
               "waited_quiet_s": waited}
        lg = lambda side, s: os.path.join(self.logs, f"{tag}.{side}.{s}")  # noqa: E731
        ip_ns = lambda side: ["ip", "netns", "exec", self.ns["NS_SND" if side == "snd" else "NS_RCV"]]  # noqa: E731
        recv = send = None
        try:
            if peer.local:
                recv = measure.Proc(["true"], lg("recv", "out"), lg("recv", "err"))
                recv.wait(time.monotonic() + 10)
            else:
                recv = measure.Proc(ip_ns("rcv") + peer.recv_argv(v), lg("recv", "out"), lg("recv", "err"),
                                env=env, cwd=REPO)
            start_deadline = time.monotonic() + 30
            if peer.local:
                pass
            elif not peer.script and not peer.url and "{port}" not in peer.recv_t:
                time.sleep(1.0)  # nothing to watch for: give the receiver a second
            elif peer.url:
                v["url"] = recv.first_line(start_deadline) or ""
                if not v["url"]:
                    raise RuntimeError("receiver printed no URL line")
            elif not measure.wait_listening(self.ns["NS_RCV"], self.port, recv, start_deadline):
                raise RuntimeError(f"receiver not listening on port {self.port} (rc={recv.rc})")
            busy0, proc0, t0 = measure.machine_busy_s(), measure.children_cpu_s(), time.monotonic()
            send = measure.Proc(ip_ns("snd") + peer.send_argv(v), lg("send", "out"), lg("send", "err"),
                                env=env, cwd=REPO)
            deadline = t0 + timeout
            if not wait_first_failure_or_sender(send, recv, deadline):
                raise RuntimeError(f"timeout after {timeout:.0f} s (sender still running)")
            if send.rc is None:
                raise RuntimeError(f"receiver failed rc={recv.rc} while sending")
            if send.rc != 0:
                raise RuntimeError(f"sender failed rc={send.rc}")
            if peer.exits:
                if not wait_all([recv], deadline):
                    raise RuntimeError(f"timeout after {timeout:.0f} s (receiver still running)")
                if recv.rc != 0:
                    raise RuntimeError(f"receiver failed rc={recv.rc}")
                t1 = max(send.end, recv.end)
            else:
                t1 = send.end
            busy1 = measure.machine_busy_s()
            if not peer.exits:
                # Let the daemon reap its per-connection children (their rusage) before stopping it.
                time.sleep(0.3)
                recv.kill()
            proc1 = measure.children_cpu_s()
            secs = t1 - t0
            gb = manifest["bytes"] / 1e9
            rec.update(seconds=round(secs, 4), mb_s=round(manifest["bytes"] / 1e6 / secs, 1),
                       files_s=round(rec["files"] / secs, 1) if peer.tree else None,
                       cpu_machine_s=round(busy1 - busy0, 2),
                       cpu_s_per_gb=round((busy1 - busy0) / gb, 3),
                       cpu_proc_s=round(proc1 - proc0, 2),
                       cpu_proc_s_per_gb=round((proc1 - proc0) / gb, 3))
            if peer.name == "iperf3":
                try:
                    with open(lg("send", "out")) as f:
                        e = json.load(f)["end"]
                    rec["iperf3_own_mb_s"] = round(e["sum_received"]["bits_per_second"] / 8e6, 1)
                except (OSError, ValueError, KeyError):
                    pass
            for side, p in (("send", send), ("recv", recv)):
                st = p.last_json_line()
                if st is not None and peer.name != "iperf3":
                    rec[f"stats_{side}"] = st
            if peer.tree:
                problems = verify.compare(manifest, self.dst)
                rec["verified"] = not problems
                if problems:
                    rec["verify_problems"] = problems
                    raise RuntimeError("received tree differs: " + "; ".join(problems[:5]))
            rec["ok"] = True
        except (RuntimeError, OSError) as e:
            rec["error"] = str(e)
            self.failures.append(f"{tag}: {e}")
            log(f"FAIL {tag}: {e} (logs: {lg('*', '*')})")
        finally:
            for p in (send, recv):
                if p:
                    p.close()
            kill_leftovers([self.ns["NS_SND"], self.ns["NS_RCV"]])
            shutil.rmtree(self.dst, ignore_errors=True)
        if rec["ok"]:
            log(f"{tag}: {rec['mb_s']} MB/s, {rec['seconds']} s, CPU {rec['cpu_s_per_gb']} s/GB"
                + (", verified" if peer.tree else ""))
        self.runs.append(rec)
        return rec


def ensure_data(a, sets):
    gen = os.path.join(BENCH, "datasets", "gen.py")
    subprocess.run([sys.executable, gen, "--out", a.data, "--scale", a.scale, "--seed", str(a.seed),
                    "--sets", ",".join(sets)], check=True)
    out = {}
    for s in sets:
        with open(os.path.join(a.data, "manifests", f"{s}.json")) as f:
            out[s] = json.load(f)
    return out


def summarize(runs):
    """Median over repeated runs of each (link, set, tool); percentages against iperf3."""
    groups = {}
    for r in runs:
        groups.setdefault((r["link"], r["set"], r["tool"]), []).append(r)
    out = []
    for (link, set_name, tool), rs in groups.items():
        ok = [r for r in rs if r["ok"]]
        row = {"link": link, "set": set_name, "tool": tool, "runs": len(rs), "ok_runs": len(ok)}
        for k in ("mb_s", "files_s", "seconds", "cpu_s_per_gb", "cpu_proc_s_per_gb", "background_busy_frac"):
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


def background_busy(seconds=2.0):
    b0, t0 = measure.machine_busy_s(), time.monotonic()
    time.sleep(seconds)
    return round((measure.machine_busy_s() - b0) / (time.monotonic() - t0) / os.cpu_count(), 3)


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
    ap.add_argument("--timeout", type=float, default=0, help="per-transfer limit, s (default 60 + bytes/20 MB/s)")
    ap.add_argument("--no-prefault", dest="prefault", action="store_false",
                    help="do not write and free a scratch file of the set's size before each run "
                         "(see docs/bench-wdt-report.md: fresh memory is slow on this VM)")
    ap.add_argument("--wait-quiet", type=float, default=30,
                    help="before each run, wait up to this many s for the machine to be <5%% busy")
    ap.add_argument("--settle", type=float, default=1.0, help="pause before each run, s")
    ap.add_argument("--sluice", default=os.path.join(REPO, "build", "tools", "sluice"))
    ap.add_argument("--streams", type=int, default=0, help="sluice --streams (default 0: sluice's own default, 4)")
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=SEND|||RECV",
                    help="extra tool whose receiver exits by itself after one transfer")
    ap.add_argument("--peer-daemon", action="append", default=[], metavar="NAME=SEND|||RECV",
                    help="extra tool whose receiver keeps running (stopped after the sender exits)")
    ap.add_argument("--work", default="/tmp/sluice-bench", help="data sets and receive directory")
    ap.add_argument("--out", default="", help="results directory (default bench/out/wdt-report-DATE)")
    a = ap.parse_args()
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
        peers.append(Peer(t, script=os.path.join(PEERS, f"{t}.sh")))
    peers += [parse_peer(s, True) for s in a.peer] + [parse_peer(s, False) for s in a.peer_daemon]
    if peers and peers[0].name != "iperf3" and any(p.name == "iperf3" for p in peers):
        peers.sort(key=lambda p: p.name != "iperf3")

    manifests = ensure_data(a, sets)
    for s, m in manifests.items():
        # The sources must equal their manifests (a broken source would fail every tool);
        # reading them also warms the page cache for the warm variant.
        t = time.monotonic()
        problems = verify.compare(m, a.data)
        if problems:
            raise SystemExit(f"bench: source set {s} differs from its manifest: {problems[0]}; "
                             f"regenerate with bench/datasets/gen.py --force")
        log(f"source {s} checked in {time.monotonic() - t:.1f} s")
    b = Bench(a)
    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "kernel": platform.release(), "cpus": os.cpu_count(), "scale": a.scale, "seed": a.seed,
        "cold": a.cold, "runs": a.runs, "prefault": a.prefault, "streams_sluice": a.streams, "sluice": a.sluice,
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
        for link in links:
            netns("rate", "none" if link == "unbounded" else link)
            for s in sets:
                # Round robin: repeats interleave the tools, so slow drifts spread over all.
                for r in range(1, a.runs + 1):
                    for p in peers:
                        b.one(link, s, manifests[s], p, r)
    finally:
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
