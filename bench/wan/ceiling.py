#!/usr/bin/env python3
"""The emulator's own ceiling and what bounds it (issue 16, h16p).

For each case (path x RTT x tbf rate x streams), iperf3 -P N from A to B for --seconds, and
over the run's steady part (after --warm seconds): the goodput, the delay line's CPU (its
/proc utime + stime, % of one CPU), frames/s through it, drops at every stage (the line's own
counters: lost, overflow, enobufs = tbf full, sock_drops = the AF_PACKET socket's tp_drops;
the tbf's own drop count; every veth's rx/tx drops), and the machine's busy and softirq CPU
(/proc/stat, all CPUs, in CPUs). Path `veth` is a plain veth pair between two namespaces
with the same offloads off and no delay line: what the ends alone can move.
`--lines NAME=BINARY,...` runs each line case once per delay-line binary, alternating
(A/B in one call); `--perf SECONDS` keeps a `perf record -g` of the line per case.

    /work/brief/bin/bench-lock timeout 470 python3 bench/wan/ceiling.py --rtts 0.2,80 \\
        --rates 0,1000 --streams 1,8 --out /work/data/h16p/ceiling.jsonl
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wan  # noqa: E402

PORT = 5311


class Veth:
    """Two namespaces and one veth pair, offloads and sysctls as wan.Wan's ends: the baseline."""

    def __init__(self, prefix, sockbuf):
        self.p, self.sockbuf, self.line = prefix, sockbuf, None

    def ns(self, side):
        return f"{self.p}-{side}"

    def ex(self, side, args, **kw):
        return wan.sh(["ip", "netns", "exec", self.ns(side)] + [str(a) for a in args], **kw)

    def popen(self, side, args, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.ns(side)] + [str(a) for a in args], **kw)

    def down(self):
        for side in "ab":
            wan.sh(["ip", "netns", "del", self.ns(side)], check=False)

    def __enter__(self):
        self.down()
        try:
            for side in "ab":
                wan.sh(["ip", "netns", "add", self.ns(side)])
                self.ex(side, ["ip", "link", "set", "lo", "up"])
                for key in ("tcp_rmem", "tcp_wmem"):
                    self.ex(side, ["sysctl", "-q", f"net.ipv4.{key}=4096 131072 {self.sockbuf}"])
            wan.sh(["ip", "link", "add", f"{self.p}-ab", "netns", self.ns("a"), "type", "veth", "peer", "name",
                    f"{self.p}-ba", "netns", self.ns("b")])
            for side, dev, addr in (("a", "ab", wan.ADDR_A), ("b", "ba", wan.ADDR_B)):
                self.ex(side, ["ethtool", "-K", f"{self.p}-{dev}", "tso", "off", "gso", "off", "gro", "off", "tx",
                               "off", "rx", "off"])
                self.ex(side, ["ip", "addr", "add", f"{addr}/24", "dev", f"{self.p}-{dev}"])
                self.ex(side, ["ip", "link", "set", f"{self.p}-{dev}", "up"])
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()

    def devs(self):
        return [("a", f"{self.p}-ab"), ("b", f"{self.p}-ba")]


def wan_devs(w):
    return [("a", f"{w.p}-ar"), ("r", f"{w.p}-ra"), ("r", f"{w.p}-rb"), ("b", f"{w.p}-br")]


def link_drops(net, devs):
    """Each veth's rx/tx dropped counters (ip -s -j link)."""
    out = {}
    for side, dev in devs:
        j = json.loads(net.ex(side, ["ip", "-s", "-j", "link", "show", dev]).stdout)[0]["stats64"]
        out[dev] = {"rx_dropped": j["rx"]["dropped"], "tx_dropped": j["tx"]["dropped"]}
    return out


def tbf_stats(w):
    r = w.ex("r", ["tc", "-s", "-j", "qdisc", "show", "dev", f"{w.p}-rb"], check=False)
    for q in json.loads(r.stdout or "[]"):
        if q.get("kind") == "tbf":
            return {"drops": q.get("drops", 0), "overlimits": q.get("overlimits", 0), "backlog": q.get("backlog", 0)}
    return None


def cpu_times():
    """(busy, softirq) jiffies summed over all CPUs, and per CPU busy."""
    per = []
    total = None
    for line in Path("/proc/stat").read_text().splitlines():
        if not line.startswith("cpu"):
            continue
        f = [int(x) for x in line.split()[1:]]
        busy = sum(f) - f[3] - f[4]  # minus idle, iowait
        if line.startswith("cpu "):
            total = (busy, f[6])
        else:
            per.append(busy)
    return total, per


def proc_cpu(pid):
    """utime + stime of a process (all its threads), in jiffies."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12]), int(f[36])  # and the CPU it last ran on


def line_pid(w):
    """The delay line itself (the Popen is `ip netns exec`, which execs it: same pid)."""
    return w.line.pid


def iperf_case(net, a, streams, w=None, perf_path=None):
    hz = os.sysconf("SC_CLK_TCK")
    srv = net.popen("b", ["setsid", "iperf3", "-s", "-1", "-p", PORT, "-B", wan.ADDR_B], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if net.ex("b", ["ss", "-Hltn", f"sport = :{PORT}"], check=False).stdout.strip():
                break
            time.sleep(0.05)
        cli = net.popen("a", ["setsid", "iperf3", "-c", wan.ADDR_B, "-p", PORT, "-C", a.cc, "-P", streams, "-t",
                              a.seconds, "-J"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(a.warm)
        devs = wan_devs(w) if w else net.devs()
        t0 = time.monotonic()
        c0 = w.counters() if w else None
        l0 = proc_cpu(line_pid(w)) if w else None
        k0, p0 = cpu_times()
        d0, q0 = link_drops(net, devs), tbf_stats(w) if w else None
        perf = None
        if perf_path and w:
            who = ["-a"] if a.perf_all else ["-p", line_pid(w)]
            perf = subprocess.Popen(["perf", "record", "-g", "-o", perf_path, *map(str, who), "--", "sleep", str(a.perf)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(a.seconds - a.warm - 2)
        dt = time.monotonic() - t0
        c1 = w.counters() if w else None
        l1 = proc_cpu(line_pid(w)) if w else None
        k1, p1 = cpu_times()
        d1, q1 = link_drops(net, devs), tbf_stats(w) if w else None
        if perf:
            perf.wait(a.perf + 30)
        out, err = cli.communicate(timeout=a.seconds + 30)
        j = json.loads(out) if out.strip() else {}
        if "error" in j or cli.returncode != 0:
            raise RuntimeError(f"iperf3: {j.get('error', err.strip())}")
    finally:
        srv.kill()
        srv.wait()
    intervals = j["intervals"]
    steady = [i["sum"]["bits_per_second"] for i in intervals if i["sum"]["start"] >= a.warm]
    row = {"mbit": round(sum(steady) / max(1, len(steady)) / 1e6, 1),
           "mbit_total": round(j["end"]["sum_received"]["bits_per_second"] / 1e6, 1),
           "retrans": j["end"]["sum_sent"].get("retransmits"),
           "cpu_busy": round((k1[0] - k0[0]) / hz / dt, 2), "cpu_softirq": round((k1[1] - k0[1]) / hz / dt, 2),
           "per_cpu_busy": [round((b - a_) / hz / dt, 2) for a_, b in zip(p0, p1)],
           "veth_drops": {k: {x: d1[k][x] - d0[k][x] for x in d1[k]} for k in d1}}
    if w:
        row["line_cpu_pct"] = round(100 * (l1[0] - l0[0]) / hz / dt, 1)
        row["line_cpu_last"] = l1[1]
        for dn in ("ab", "ba"):
            row[f"line_{dn}"] = {k: c1[dn][k] - c0[dn][k] for k in c1[dn] if k not in ("queued", "rcvbuf")}
            row[f"line_{dn}"]["pps"] = round((c1[dn]["rx"] - c0[dn]["rx"]) / dt)
        if q0 and q1:
            row["tbf_drops"] = q1["drops"] - q0["drops"]
    return row


def case_key(r):
    """One bar group of the plot: the path, RTT, rate and streams of a row."""
    if r["path"] == "veth":
        return f"plain veth\n-P {r['streams']}"
    rate = f"{r['rate']:g} Mbit/s" if r["rate"] else "no limit"
    return f"{r['rtt']:g} ms\n{rate}\n-P {r['streams']}"


def report(paths, plot_path=None):
    """Markdown table of results files (every run, in order), and a bar plot of goodput per
    case and delay line (every run a bar)."""
    rows = [json.loads(line) for p in paths.split(",") for line in open(p) if line.strip()]
    print("| UTC | line | RTT ms | rate Mbit/s | streams | Mbit/s | line CPU % | frames/s A->B + B->A | "
          "us/frame | frames/batch | bottleneck drops | line drops | veth drops | retrans |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        vd = sum(v["rx_dropped"] + v["tx_dropped"] for v in r["veth_drops"].values())
        if r["path"] == "veth":
            print(f"| {r['utc'][11:19]} | plain veth | 0 | - | {r['streams']} | {r['mbit']:.0f} | - | - | - | - | - | - | "
                  f"{vd} | {r['retrans']:,} |")
            continue
        ab, ba = r["line_ab"], r["line_ba"]
        pps = ab["pps"] + ba["pps"]
        us = r["line_cpu_pct"] / 100 / pps * 1e6 if pps else 0
        batch = f"{ab['tx'] / ab['batches']:.1f}" if ab.get("batches") else "1"
        # the tbf's own count and the line's ENOBUFS are the same drops; the line's queue is the other bottleneck
        bott = max(r.get("tbf_drops") or 0, ab["enobufs"]) + ab.get("queue_drops", 0)
        line = ab["sock_drops"] + ba["sock_drops"] + ab["overflow"] + ba["overflow"]
        rate = f"{r['rate']:g}" if r["rate"] else "none"
        print(f"| {r['utc'][11:19]} | {r['line']} | {r['rtt']:g} | {rate} | {r['streams']} | {r['mbit']:.0f} | "
              f"{r['line_cpu_pct']:.0f} | {ab['pps']:,} + {ba['pps']:,} | {us:.1f} | {batch} | {bott:,} | {line} | "
              f"{vd} | {r['retrans']:,} |")
    if not plot_path:
        return 0
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = list(dict.fromkeys(case_key(r) for r in rows))
    names = list(dict.fromkeys(r.get("line", "plain veth") for r in rows))
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(1.4 * len(cases) + 2, 4.2))
    for i, name in enumerate(names):
        for j, key in enumerate(cases):
            got = [r["mbit"] for r in rows if r.get("line", "plain veth") == name and case_key(r) == key]
            xs = [j - 0.4 + width * (i + 0.5)] * len(got)
            ax.scatter(xs, got, color=f"C{i}", zorder=3, s=14)
            if got:
                ax.bar(xs[0], sum(got) / len(got), width, color=f"C{i}", alpha=0.6,
                       label=name if j == next(k for k, c in enumerate(cases) if any(
                           r.get("line", "plain veth") == name and case_key(r) == c for r in rows)) else None)
    top = 1.15 * max([r["mbit"] for r in rows if r["path"] == "line"] or [1000])
    ax.set_ylim(0, top)
    for j, key in enumerate(cases):  # the plain veth is off the scale: its figure as text
        for r in rows:
            if case_key(r) == key and r["mbit"] > top:
                ax.annotate(f"{r['mbit']:.0f}", (j, top * 0.95), ha="center", fontsize=8)
    ax.set_xticks(range(len(cases)), cases, fontsize=8)
    ax.set_ylabel("iperf3 goodput, Mbit/s (bar: mean, dots: runs)")
    ax.axhline(956, color="k", linestyle=":", linewidth=1, label="1 Gbit/s in 1448-byte payloads")
    ax.set_title("The WAN emulator's ceiling by delay line (bench/wan/ceiling.py)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(plot_path, dpi=90)
    return 0


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", default="line,veth", help="line (the emulator) and/or veth (no delay line)")
    ap.add_argument("--rtts", default="0.2,80")
    ap.add_argument("--rates", default="0,1000", help="tbf Mbit/s toward B; 0: none")
    ap.add_argument("--streams", default="1,8")
    ap.add_argument("--cc", default="bbr")
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--warm", type=int, default=4)
    ap.add_argument("--lines", default="",
                    help="NAME=BINARY[@OPTIONS],... delay lines to alternate (default: the built one)")
    ap.add_argument("--line-args", default="", help="extra delay line options for every line case")
    ap.add_argument("--perf", type=int, default=0, help="seconds of perf record -g on the line per case")
    ap.add_argument("--perf-all", action="store_true", help="perf record the whole machine, not only the line")
    ap.add_argument("--perf-dir", default="/work/data/h16p/perf")
    ap.add_argument("--prefix", default="slceil")
    ap.add_argument("--out")
    ap.add_argument("--report", help="FILE[,FILE...]: print the markdown table of results instead of running")
    ap.add_argument("--plot", help="with --report: a bar plot of goodput per case and line (PNG)")
    return ap.parse_args(argv)


def main(argv):
    a = parse_args(argv)
    if a.report:
        return report(a.report, a.plot)
    if not a.out:
        raise SystemExit("ceiling.py: --out FILE is required to run")
    # NAME=BINARY[@OPTIONS]: options (space-separated) for that line only, after --line-args
    lines = [tuple(x.split("=", 1)) for x in a.lines.split(",") if x] or [("built", wan.find_delayline())]
    lines = [(n, *b.partition("@")[::2]) for n, b in lines]
    out = open(a.out, "a")
    sha = wan.sh(["git", "-C", str(wan.HERE), "rev-parse", "--short", "HEAD"], check=False).stdout.strip()

    def emit(row):
        row.update(utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), commit=sha, cc=a.cc)
        print(json.dumps(row), flush=True)
        out.write(json.dumps(row) + "\n")
        out.flush()

    if a.perf:
        Path(a.perf_dir).mkdir(parents=True, exist_ok=True)
    for rtt in [float(x) for x in a.rtts.split(",")]:
        for rate in [float(x) for x in a.rates.split(",")]:
            for n in [int(x) for x in a.streams.split(",")]:
                if "veth" in a.paths and rtt == float(a.rtts.split(",")[0]) and rate == 0:
                    with Veth(a.prefix, 64 << 20) as v:
                        emit({"path": "veth", "rtt": 0, "rate": 0, "streams": n, **iperf_case(v, a, n)})
                if "line" not in a.paths:
                    continue
                for name, binary, opts in lines:
                    # "line-bottleneck" among a line's options: the rate limit in the line, no tbf
                    words = f"{a.line_args} {opts}".split()
                    where = "line" if "line-bottleneck" in words else "tbf"
                    os.environ["SLUICE_DELAYLINE_ARGS"] = " ".join(x for x in words if x != "line-bottleneck")
                    w = wan.Wan(prefix=a.prefix, delay_ab=rtt / 2, delay_ba=rtt / 2, rate_mbit=rate,
                                delayline=binary, log=lambda m: None, bottleneck=where)
                    with w:
                        perf = f"{a.perf_dir}/{name}-{rtt:g}ms-{rate:g}-{n}.data" if a.perf else None
                        emit({"path": "line", "line": name, "line_opts": f"{a.line_args} {opts}".strip(), "rtt": rtt, "rate": rate, "streams": n,
                              **iperf_case(w, a, n, w, perf)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
