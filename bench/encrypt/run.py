#!/usr/bin/env python3
"""Issue 18's bench: encrypted sluice against WDT with its default AES-128-GCM, in the same
run, as ratios (docs/benchmarks.md, "Issue 18").

  run.py --case loopback --src DIR      one big file over 127.0.0.1, file to file
  run.py --case veth --sets DIR         the large and minor sets over an unbounded veth
  run.py --case 1gbit --sets DIR        the same sets through tbf 1 Gbit/s, against iperf3

sluice: `sluice recv DST --bind IP --token T --json [--encrypt]`, `sluice send SRC URL --json
[--encrypt]` (--encrypt only on loopback: any other peer is encrypted by default). WDT:
`wdt -directory DST -start_port 0 -num_ports 8 -transfer_id T -ipv4` and `wdt -directory SRC
-connection_url URL` (its default encryption; `-encryption_type none` for the clear reference).
Time: from the sender's start until both ends exited. CPU: whole-machine busy CPU seconds
(/proc/stat) over that time, per GB moved; and the tools' own (getrusage of the finished
sender and receiver, user + system: softirq work the kernel charged to them, not what
ksoftirqd or other users ran), which other users' load does not inflate. Page cache warm (sources read first), dst removed
and `sync` before every run. Rounds alternate the tools; medians are printed. Each sluice
row records the send_path and recv_path of its stats (tls_records / tls_direct when encrypted)
and who sealed its records (tls_record_engine: ipsec-mb or openssl). A tool name ending in
"-openssl" runs sluice with SLUICE_RECORD_ENGINE=openssl on both sides (the records on
OpenSSL's EVP instead of intel-ipsec-mb), for a before/after in the same run. A tool name
starting "sluice-old" (sluice-old, sluice-old-enc, ...) runs the binary given by --old-sluice
(an earlier build) the same way: a before/after of a change in the same run. Each sluice row
also records the receiver's and the sender's own CPU per GB from their JSON (cpu_user_s +
cpu_sys_s), the two sides apart.

At full size (--cold, issue 18, h18o): a set larger than the page cache (the large set at
scale 1: 34 GB against 24 GiB of RAM) cannot start warm, and reading it first only evicts
itself: each run starts cold instead (sync, drop_caches) and reads its source from the disk it
writes its copy to; each row then records the disk's utilisation and read/write rates over the
run (/proc/diskstats) and the machine's busy share, so that what bounds a run (disk, CPU,
veth) is read from the same run. --check MANIFEST compares every copy with the set's manifest
(sizes and sha256, bench/datasets/verify.py) after the run, outside its timing. Each side
runs in a session of its own (setsid: this kernel's autogroups would otherwise weigh the
sides' CPU by their thread counts, docs/benchmarks.md, h15k).
"""
import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NETNS = ROOT / "bench" / "testbed" / "netns.sh"
SLUICE = os.environ.get("SB_SLUICE", str(ROOT / "build" / "tools" / "sluice"))
WDT = shutil.which("wdt") or "/work/data/h19/wdt/bin/wdt"
IP_SND, IP_RCV = "10.218.7.1", "10.218.7.2"
ENV = dict(os.environ, SB_NS_SND="sl18-bench-snd", SB_NS_RCV="sl18-bench-rcv", SB_IP_SND=IP_SND, SB_IP_RCV=IP_RCV)


DISK = os.environ.get("SB_DISK", "vda")


def disk_counters():
    """(sectors read, sectors written, ms the disk was busy) of DISK, from /proc/diskstats."""
    for line in open("/proc/diskstats"):
        f = line.split()
        if f[2] == DISK:
            return int(f[5]), int(f[9]), int(f[12])
    return 0, 0, 0


def drop_caches():
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def check_copy(manifest, dst, every=1):
    """The copy against the set's manifest (verify.py); exits naming the differences."""
    sys.path.insert(0, str(ROOT / "bench" / "datasets"))
    import verify
    m = json.load(open(manifest))
    root = dst
    if not (dst / m["set"]).is_dir():  # WDT writes the set's contents, sluice the set's directory
        root = dst.parent / (dst.name + "-root")
        root.mkdir(exist_ok=True)
        link = root / m["set"]
        if not link.is_symlink():
            link.symlink_to(dst)
    t0 = time.monotonic()
    problems = verify.compare(m, str(root), every=every)
    if root != dst:
        shutil.rmtree(root)
    if problems:
        sys.exit(f"{dst}: the copy differs from {manifest}: " + "; ".join(problems[:5]))
    return time.monotonic() - t0


COLD = {"on": False, "check": None, "every": 1}


def busy_seconds():
    v = list(map(int, open("/proc/stat").readline().split()[1:9]))
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def tree_bytes(p):
    p = Path(p)
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def warm(p):
    subprocess.run(f"find {p} -type f -print0 | xargs -0 cat > /dev/null", shell=True, check=True)


def ns(side, cmd, ns_on):
    return [str(NETNS), "exec", side] + cmd if ns_on else cmd


# --fresh-dst: every run writes into a new directory, all removed when the call ends (and the
# next call waits until RECENTCY s after that removal). This file system (the machine's root,
# ext4 without a journal) does not hand out an inode number freed less than 60 s ago
# (ext4 recently_deleted(), only without a journal; 300 s while its inode-table block is
# dirty) and reads an inode-table block for every candidate it skips: with the previous run's
# 3,208 files removed just before each run, every file created paid that scan, on both tools
# (perf, h18f: up to 29% of the machine's samples), and the minor set's runs spread 2-3x.
FRESH = {"on": False, "n": 0, "made": [], "each": False, "removed_at": None}
RECENTCY = 61


def fresh(dst):
    if not FRESH["on"]:
        return dst
    if FRESH["removed_at"] is not None:
        wait = RECENTCY - (time.monotonic() - FRESH["removed_at"])
        if wait > 0:
            print(f"waiting {wait:.0f} s: the last copy was removed less than {RECENTCY} s ago", flush=True)
            time.sleep(wait)
    FRESH["n"] += 1
    d = dst.parent / f"{dst.name}-{FRESH['n']}"
    FRESH["made"].append(d)
    return d


def settle_after_removals(work):
    mark = work / ".removed_at"
    if FRESH["on"] and mark.exists():
        wait = RECENTCY - (time.time() - mark.stat().st_mtime)
        if wait > 0:
            print(f"waiting {wait:.0f} s: the last call removed its copies less than {RECENTCY} s ago", flush=True)
            time.sleep(wait)


def rmtree_wide(d):
    """Removes d with its top-level entries in parallel: this file system is mounted with
    `discard`, so every unlink waits for its extents' discard, and one rmtree of a 102,645-file
    copy took over 5 minutes of a bench call where 16 at once took 15 s."""
    d = Path(d)
    if d.is_dir():
        from concurrent.futures import ThreadPoolExecutor
        tops = [p for p in d.iterdir()]
        subs = [q for p in tops if p.is_dir() and not p.is_symlink() for q in p.iterdir()]
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda q: shutil.rmtree(q, ignore_errors=True) if q.is_dir() and not q.is_symlink()
                        else q.unlink(missing_ok=True), subs))
    shutil.rmtree(d, ignore_errors=True)


def remove_each(dst):
    """--remove-each: the run's copy removed once it is checked (a set whose copies do not fit
    the disk together: the minor set at full size, 21 GB a copy), the next run waiting out the
    file system's RECENTCY after it as between calls."""
    if FRESH["on"] and FRESH["each"]:
        rmtree_wide(dst)
        subprocess.run(["sync"])
        FRESH["removed_at"] = time.monotonic()


def remove_copies(work):
    for d in FRESH["made"]:
        rmtree_wide(d)
    if FRESH["made"]:
        subprocess.run(["sync"])
        (work / ".removed_at").write_text(f"{time.time()}\n")


OLD = {"sluice": None}
LOGS = {"prefix": "run"}


class ToolFailed(Exception):
    """A tool's run failed (its exit status): the run is recorded as failed and the call goes on,
    so that the runs before it in the same call are not lost (h18q: WDT failing its 34 GB run
    with SOCKET_WRITE_ERROR on a loaded machine took the call's sluice run with it)."""


def one(tool, src, dst, ip, ns_on, extra, sink, tags={}):
    dst = fresh(dst)
    env = dict(ENV)
    binary = SLUICE
    if tool.startswith("sluice-old"):
        binary = OLD["sluice"]
        assert binary, f"{tool}: give --old-sluice BINARY"
    if tool.endswith("-openssl"):
        env["SLUICE_RECORD_ENGINE"] = "openssl"
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    subprocess.run(["sync"])
    # Every run starts from a source wholly in the page cache. Warmed once per call, a tool
    # that writes its copy through the page cache (WDT) pushed part of the source out of it on
    # a machine whose cache holds other data, and the next tool read it from disk: sluice,
    # which runs after WDT in each round, measured 470-730 MB/s encrypted against 1,170-1,300
    # alone or first (2026-11-24, lead).
    if COLD["on"]:
        drop_caches()
    else:
        warm(src)
    if tool.startswith("sluice"):
        rcmd = [binary, "recv", str(dst), "--bind", ip, "--port", "0", "--token", "bench", "--json"] + extra
    elif tool.startswith("wdt"):
        rcmd = [WDT, "-directory", str(dst), "-start_port", "0", "-num_ports", "8", "-transfer_id", "bench", "-ipv4"] + extra
    else:  # iperf3
        rcmd = ["iperf3", "-s", "-1", "-B", ip, "-p", "5218"]
    # The tools' own CPU (both processes and what they ran, user + system), beside the whole
    # machine's: on a machine shared with other users the latter carries their work too.
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rx = subprocess.Popen(ns("rcv", rcmd, ns_on), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True)
    if tool.startswith("iperf3"):
        time.sleep(0.5)
        url = None
    else:
        url = rx.stdout.readline().strip()
        assert url, rx.stderr.read()
    if tool.startswith("sluice"):
        scmd = [binary, "send", str(src), url, "--json"] + extra
        if tool.endswith("-s8"):  # the sender's streams only (the receiver takes what comes)
            scmd += ["--streams", "8"]
    elif tool.startswith("wdt"):
        host = url.split("://", 1)[1].split("?", 1)[0]
        scmd = [WDT, "-directory", str(src), "-connection_url", url.replace("://" + host, "://" + ip, 1)] + extra
    else:
        scmd = ["iperf3", "-c", ip, "-p", "5218", "-n", str(tree_bytes(src)), "-C", "bbr"]
    size = tree_bytes(src)
    limit = max(300, size / 50e6)  # 50 MB/s at the least, on a loaded machine
    c0, t0, d0 = busy_seconds(), time.monotonic(), disk_counters()
    tx = subprocess.run(ns("snd", scmd, ns_on), env=env, capture_output=True, text=True, timeout=limit,
                        start_new_session=True)
    out, err = rx.communicate(timeout=120)
    t1, c1, d1 = time.monotonic(), busy_seconds(), disk_counters()
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    tool_cpu = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
    if tx.returncode != 0 or rx.returncode != 0:
        # Both sides' whole output beside the results (the row keeps only their tails): why WDT
        # failed the full-size minor set (h18r) was cut off at 800 characters.
        log = Path(LOGS["prefix"] + f".{time.strftime('%H%M%S', time.gmtime())}-{tool}.log")
        log.write_text(f"sender {tx.returncode}\n{tx.stdout}\n{tx.stderr}\nreceiver {rx.returncode}\n{out}\n{err}\n")
        remove_each(dst)  # a failed run's copy too: left, it filled the disk under the next run (h18r)
        raise ToolFailed(f"{tool}: sender {tx.returncode} {tx.stderr[-800:]}\nreceiver {rx.returncode} {err[-800:]}")
    if not tool.startswith("iperf3"):
        got = tree_bytes(dst)
        assert got == size, f"{tool}: received {got} of {size} bytes"
    rec = {"tool": tool, "bytes": size, "seconds": t1 - t0, "mb_s": size / (t1 - t0) / 1e6, "cpu_s_per_gb": (c1 - c0) / (size / 1e9),
           "tool_cpu_s_per_gb": tool_cpu / (size / 1e9), "loadavg": os.getloadavg()[0],
           "disk_util": (d1[2] - d0[2]) / 1e3 / (t1 - t0), "disk_read_mb_s": (d1[0] - d0[0]) * 512 / (t1 - t0) / 1e6,
           "disk_write_mb_s": (d1[1] - d0[1]) * 512 / (t1 - t0) / 1e6,
           "machine_busy": (c1 - c0) / (t1 - t0) / os.cpu_count(), "when": time.strftime("%H:%M:%S", time.gmtime())}
    if tool.startswith("sluice"):
        s = json.loads(tx.stdout.strip().splitlines()[-1])
        rec["encryption"] = s["encryption"]
        rec["encryption_streams"] = s.get("encryption_streams", "")
        rec["send_path"] = s.get("send_path", "")
        # Which receive path ran (tls_direct, tls_records, direct, ...): a run that fell back
        # to a slower one must not be read as the same case (note11).
        got = json.loads(out.strip().splitlines()[-1])
        rec["recv_path"] = got.get("recv_path", "")
        rec["tls_cipher"] = s.get("tls_cipher", "")
        rec["tls_record_engine"] = f"{s.get('tls_record_engine', '')} / {got.get('tls_record_engine', '')}"
        rec["send_cpu_s_per_gb"] = (s.get("cpu_user_s", 0) + s.get("cpu_sys_s", 0)) / (size / 1e9)
        rec["recv_cpu_s_per_gb"] = (got.get("cpu_user_s", 0) + got.get("cpu_sys_s", 0)) / (size / 1e9)
    # Recorded now: a call's timeout during the check or the removal below keeps the run (h18r:
    # the full-size minor set's first run was lost that way).
    rec.update(tags)
    sink.append(rec)
    print(f"{rec['when']} {tool}: {rec['mb_s']:,.0f} MB/s, tools' own CPU {rec['tool_cpu_s_per_gb']:.2f} s/GB, "
          f"load {rec['loadavg']:.1f}", flush=True)
    if COLD["on"]:
        # What the tool left in the page cache to be written (WDT writes through it, sluice's
        # direct path does not): the time to flush it, outside the run's time, said beside it.
        s0 = time.monotonic()
        subprocess.run(["sync"], check=True)
        rec["sync_after_s"] = time.monotonic() - s0
    if COLD["check"] and not tool.startswith("iperf3"):
        rec["check"] = "not finished"  # what is written if the call's timeout comes first
        rec["check_s"] = check_copy(COLD["check"], dst, COLD["every"])
        rec["check"], rec["check_every"] = "equal", COLD["every"]
    remove_each(dst)
    return rec


def table(results, title):
    print(f"\n### {title}\n")
    print("| tool | MB/s (median) | CPU s/GB (median) | tools' own CPU s/GB | sender / receiver CPU s/GB | runs MB/s | send / receive path | record engine (send / receive) |")
    print("|---|---|---|---|---|---|---|---|")
    med = {}
    for tool in dict.fromkeys(r["tool"] for r in results):
        rs = [r for r in results if r["tool"] == tool]
        m, c = statistics.median(r["mb_s"] for r in rs), statistics.median(r["cpu_s_per_gb"] for r in rs)
        own = statistics.median(r["tool_cpu_s_per_gb"] for r in rs)
        med[tool] = (m, c, own)
        runs = ", ".join(f"{r['mb_s']:,.0f}" for r in rs)
        paths = ", ".join(dict.fromkeys(f"{r['send_path']} / {r['recv_path']}" for r in rs if "recv_path" in r)) or "-"
        engines = ", ".join(dict.fromkeys(r["tls_record_engine"] for r in rs if r.get("tls_record_engine", " / ") != " / ")) or "-"
        sides = "-"
        if all("recv_cpu_s_per_gb" in r for r in rs):
            sides = (f"{statistics.median(r['send_cpu_s_per_gb'] for r in rs):.2f} / "
                     f"{statistics.median(r['recv_cpu_s_per_gb'] for r in rs):.2f}")
        print(f"| {tool} | {m:,.0f} | {c:.2f} | {own:.2f} | {sides} | {runs} | {paths} | {engines} |", flush=True)
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=["loopback", "veth", "1gbit"], required=True)
    ap.add_argument("--src", help="loopback: the directory holding the file")
    ap.add_argument("--sets", help="veth, 1gbit: gen.py's --out")
    ap.add_argument("--work", default="/work/data/h18/bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tools", default="",
                    help="loopback: which of sluice-enc, sluice-old-enc, sluice-enc-openssl, wdt-enc, sluice-clear, "
                         "wdt-clear run (default: sluice-enc, wdt-enc and the clear ones); veth: which of sluice "
                         "(encrypted), sluice-s8 (encrypted, 8 streams), sluice-old, sluice-openssl, "
                         "wdt-enc, wdt-enc-t60 (its socket timeouts 60 s, not 5), sluice-clear, wdt-clear (default: sluice, wdt-enc), run in the order given; one bench-lock call stays short")
    ap.add_argument("--old-sluice", help="the binary the sluice-old* tools run (an earlier build, for a before/after)")
    ap.add_argument("--set-names", default="large,minor", help="veth, 1gbit: which sets")
    ap.add_argument("--out", default="/work/data/h18/bench/results.jsonl")
    ap.add_argument("--cold", action="store_true",
                    help="each run from a cold page cache (sync, drop_caches) instead of a warmed source: a set "
                         "larger than the page cache")
    ap.add_argument("--check", metavar="MANIFEST", help="compare every copy with the set's manifest after its run")
    ap.add_argument("--check-every", type=int, default=1, metavar="N",
                    help="with --check: every file's name and size, the sha256 of every Nth file only (the "
                         "full-size minor set: hashing 21 GB took minutes of a call on a loaded machine)")
    ap.add_argument("--fresh-dst", action="store_true",
                    help="each run into a new directory, removed when the call ends (no ext4 recently-deleted scan)")
    ap.add_argument("--remove-each", action="store_true",
                    help="with --fresh-dst: each copy removed after its run (and check), the next run waiting "
                         f"{RECENTCY} s after that (copies that do not fit the disk together)")
    a = ap.parse_args()
    if a.remove_each and not a.fresh_dst:
        ap.error("--remove-each goes with --fresh-dst")
    # bench-lock's timeout ends a call with SIGTERM: the runs done by then are still written.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("run.py: terminated (the call's timeout)"))
    FRESH["on"], FRESH["each"] = a.fresh_dst, a.remove_each
    COLD["on"], COLD["check"], COLD["every"] = a.cold, a.check, max(1, a.check_every)
    OLD["sluice"] = a.old_sluice
    LOGS["prefix"] = a.out + ".failed"
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    settle_after_removals(work)
    results = []
    try:
        run_cases(a, work, results)
    finally:
        remove_copies(work)
        with open(a.out, "a") as f:
            for r in results:
                f.write(json.dumps(dict(r, case=a.case, fresh_dst=a.fresh_dst)) + "\n")


def run_cases(a, work, results):
    if a.case == "loopback":
        warm(a.src)
        tools = [("sluice-enc", ["--encrypt"]), ("sluice-old-enc", ["--encrypt"]), ("sluice-enc-openssl", ["--encrypt"]),
                 ("wdt-enc", []), ("sluice-clear", []), ("wdt-clear", ["-encryption_type", "none"])]
        want = a.tools.split(",") if a.tools else ["sluice-enc", "wdt-enc", "sluice-clear", "wdt-clear"]
        tools = sorted((t for t in tools if t[0] in want), key=lambda t: want.index(t[0]))  # in the order given
        for _ in range(a.rounds):
            for tool, extra in tools:
                one(tool, Path(a.src), work / "dst", "127.0.0.1", False, extra, results)
        med = table(results, "loopback, file to file")
        if "sluice-enc" in med and "wdt-enc" in med:
            print(f"\nsluice-enc / wdt-enc: {med['sluice-enc'][0] / med['wdt-enc'][0]:.2f}x MB/s, "
                  f"{med['sluice-enc'][1] / med['wdt-enc'][1]:.2f}x CPU/GB, "
                  f"{med['sluice-enc'][2] / med['wdt-enc'][2]:.2f}x the tools' own CPU/GB")
    else:
        subprocess.run([str(NETNS), "up"] + (["1gbit"] if a.case == "1gbit" else []), env=ENV, check=True, capture_output=True)
        try:
            for set_name in a.set_names.split(","):
                src = Path(a.sets) / set_name
                if not a.cold:
                    warm(src)
                if a.case == "veth":
                    tools = [("sluice", []), ("sluice-s8", []), ("sluice-old", []), ("sluice-openssl", []), ("wdt-enc", []),
                             # WDT's default socket timeouts are 5 s: at full size on a loaded
                             # machine its sender failed the minor set with SOCKET_WRITE_ERROR
                             # (h18r, 2 of 2; h18q's large set at load 20-26). 60 s on both sides.
                             ("wdt-enc-t60", ["-read_timeout_millis", "60000", "-write_timeout_millis", "60000"]),
                             ("sluice-clear", ["--no-encrypt"]), ("wdt-clear", ["-encryption_type", "none"])]
                    want = a.tools.split(",") if a.tools else ["sluice", "wdt-enc"]
                    tools = sorted((t for t in tools if t[0] in want), key=lambda t: want.index(t[0]))  # in the order given
                else:
                    tools = [("iperf3", []), ("sluice", [])]
                first = len(results)
                for _ in range(a.rounds):
                    for tool, extra in tools:
                        try:
                            one(tool, src, work / "dst", IP_RCV, True, extra, results, dict(set=set_name, case=a.case))
                        except ToolFailed as e:
                            print(f"FAILED {e}", flush=True)
                            results.append({"tool": tool, "failed": str(e)[-1600:], "set": set_name,
                                            "when": time.strftime("%H:%M:%S", time.gmtime())})
                rs = [r for r in results[first:] if "failed" not in r]
                med = table(rs, f"{a.case}, set {set_name}")
                other = "wdt-enc" if a.case == "veth" else "iperf3"
                if "sluice" in med and other in med:
                    print(f"\nsluice / {other}: {med['sluice'][0] / med[other][0]:.2f}x MB/s, "
                          f"{med['sluice'][1] / med[other][1]:.2f}x CPU/GB, "
                          f"{med['sluice'][2] / med[other][2]:.2f}x the tools' own CPU/GB")
        finally:
            subprocess.run([str(NETNS), "down"], env=ENV, capture_output=True)


if __name__ == "__main__":
    main()
