#!/usr/bin/env python3
"""Issue 16's first WAN matrix: sluice beside iperf3 through the emulator (wan.py).

RTT x random loss (A->B, the data direction) x streams, each cell in the same emulator run:
sluice with a fixed stream count (cubic and bbr, --cc) sending a 1 GiB file from the page
cache to a receiver that verifies and discards it (--recv-path null), and iperf3 -P N (cubic
and bbr, -C). Every run is bounded in time: a sluice transfer still running at --seconds is
measured from TCP_INFO (ss) and /proc at that moment and then stopped ("partial").

    flock /run/sluice-bench.lock python3 bench/wan/run.py --out /work/data/h16/wan.jsonl
    python3 bench/wan/run.py --report /work/data/h16/wan.jsonl --plot docs/img/wan-first-matrix.png
"""
import argparse
import json
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
import wan  # noqa: E402
import wan_report  # noqa: E402
from wan_movers import run_iperf3, run_sluice, run_tcp  # noqa: E402


def run_matrix(a):
    data = Path(a.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    if not Path(a.file).exists() or Path(a.file).stat().st_size != a.size:
        print(f"run: writing {a.size} random bytes to {a.file}", flush=True)
        subprocess.run(["dd", "if=/dev/urandom", f"of={a.file}", "bs=1M", f"count={a.size >> 20}", "status=none"],
                       check=True)
    token_file = data / "token"
    token_file.write_text(secrets.token_hex(16))
    token_file.chmod(0o600)
    out = open(a.out, "a")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for rtt in a.rtts:
        w = wan.Wan(prefix="slwanb", delay_ab=rtt / 2, delay_ba=rtt / 2, loss_ab=0.01, rate_mbit=a.rate,
                    log=lambda m: print(m, flush=True), bottleneck=a.bottleneck,
                    own_sessions=a.own_sessions)
        with w:
            if a.validate:  # off only for diagnostic runs (rows say "validated": false)
                w.validate()  # RTT, 1% loss counted in the line, one CUBIC stream vs Mathis at 1%
            for loss in a.losses:
                w.set_loss(loss / 100)
                order = ((n, rep, tool) for rep in range(a.repeat) for n in a.streams for tool in a.tools) if a.alternate \
                    else ((n, rep, tool) for n in a.streams for rep in range(a.repeat) for tool in a.tools)
                for n, rep, tool in order:
                        for cc in a.cc:
                            # Into the page cache again before every run: on the shared machine
                            # pages of the file were evicted between runs, and the sender read up
                            # to 500 MB of a 1 GiB run from disk (O_DIRECT), its last blocks at
                            # disk speed (h16s).
                            subprocess.run(["cat", a.file], stdout=subprocess.DEVNULL, check=True)
                            c0 = w.counters()["ab"]
                            t = time.monotonic()
                            try:
                                if tool == "iperf3" and (n == "auto" or "+" in cc):
                                    continue  # iperf3 has no automatic stream count, nor sluice's options
                                if tool in ("tarnc", "rsync", "wdt"):
                                    if n == "auto" or (res := peers.run_peer(w, a, tool, cc, int(n))) is None:
                                        continue
                                elif tool in ("tcp", "tcplowat"):  # plain TCP sockets, the same file as one transfer
                                    if n == "auto":
                                        continue
                                    # tcplowat: with sluice's bound on unsent bytes (send_backlog.hpp)
                                    res = run_tcp(w, a, cc, int(n), 2 << 20 if tool == "tcplowat" else 0)
                                elif tool == "base":  # --base: another sluice binary, side by side
                                    res = run_sluice(w, a, cc, n, token_file, a.base)
                                else:
                                    res = run_sluice(w, a, cc, n, token_file) if tool == "sluice" else \
                                        run_iperf3(w, a, cc, int(n))
                            except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as e:
                                res = {"error": str(e)[-300:]}
                            c1 = w.counters()["ab"]
                            rx = c1["rx"] - c0["rx"]
                            res.update(validated=a.validate, run=rep, own_sessions=a.own_sessions,
                                       binary=a.base if tool == "base" else a.sluice if tool == "sluice" else "",
                                       send_args=a.send_args if tool in ("sluice", "base") else "",
                                       rtt_ms=rtt, loss_pct=loss, rate_mbit=a.rate, streams=int(n) if n.isdigit() else n, tool=tool, cc=cc,
                                       wall_s=round(time.monotonic() - t, 2), frames_ab=rx,
                                       measured_loss_pct=100 * (c1["lost"] - c0["lost"]) / rx if rx else 0,
                                       # the bottleneck's drops: the tbf's (ENOBUFS) or the line's own queue
                                       tbf_drops=c1["enobufs"] - c0["enobufs"] +
                                       c1.get("queue_drops", 0) - c0.get("queue_drops", 0),
                                       line_drops=c1["overflow"] - c0["overflow"] +
                                       c1.get("sock_drops", 0) - c0.get("sock_drops", 0))
                            if "bytes" in res and res["seconds"] > 0:
                                res["goodput_mbit"] = res["bytes"] * 8 / res["seconds"] / 1e6
                                res["cpu_s_per_gb"] = res["cpu_s"] / (res["bytes"] / 1e9) if res["bytes"] else None
                                res["retrans_pct"] = 100 * res["retrans_bytes"] / res["bytes"] if res["bytes"] else None
                            print(json.dumps(res), flush=True)
                            out.write(json.dumps(res) + "\n")
                            out.flush()
    if not a.keep_file:
        Path(a.file).unlink(missing_ok=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rtts", default="20,80")
    ap.add_argument("--losses", default="0,1,5")
    ap.add_argument("--streams", default="1,4,8,16")
    ap.add_argument("--cc", default="cubic,bbr",
                    help="congestion controls; sluice's may carry send options: bbr+pace, bbr+no-pace")
    ap.add_argument("--tools", default="sluice,iperf3", help="also: tcp (tcpbound.py: plain TCP, one whole transfer; tcplowat: with TCP_NOTSENT_LOWAT 2 MiB), tarnc, rsync, wdt (bench/wan/peers.py)")
    ap.add_argument("--rate", type=float, default=1000.0,
                    help="bottleneck Mbit/s (the issue's 1 Gbit/s: the line's own bucket carries it, h16p; "
                         "through --bottleneck tbf the tbf's timer held it near 650-750)")
    ap.add_argument("--bottleneck", choices=["line", "tbf"], default="line",
                    help="the rate limit: the delay line's own token bucket, or a tbf on R's veth (wan.py)")
    ap.add_argument("--seconds", type=float, default=15.0, help="time bound of one sluice run")
    ap.add_argument("--iperf-seconds", type=int, default=8,
                    help="iperf3's run (the runs not by bytes)")
    ap.add_argument("--iperf-bound", type=int, default=60,
                    help="with --iperf-bytes: the time bound of one run (+30 s; a run past it is an error row)")
    ap.add_argument("--iperf-bytes", type=int, default=0,
                    help="iperf3 -n BYTES (e.g. 1073741824, sluice's file): a whole transfer, start-up included")
    ap.add_argument("--iperf-bytes-cc", default="bbr", help="with --iperf-bytes: the congestion controls run by bytes")
    ap.add_argument("--log", action="store_true",
                    help="keep the sender's -v lines in each sluice row, each with the seconds since its start")
    ap.add_argument("--size", type=int, default=1 << 30)
    ap.add_argument("--data-dir", default="/work/data/h16")
    ap.add_argument("--sluice", default=str(Path(__file__).resolve().parents[2] / "build/tools/sluice"))
    ap.add_argument("--out", default="/work/data/h16/wan.jsonl")
    ap.add_argument("--report", help="print the markdown table of a results file instead of running")
    ap.add_argument("--plot", help="with --report: write a plot (PNG)")
    ap.add_argument("--send-args", default="", help="extra sluice send arguments (e.g. '--block-size 1048576')")
    ap.add_argument("--keep-file", action="store_true",
                    help="keep the 1 GiB source for the next call (writing it takes 10-30 s of the bench lock)")
    ap.add_argument("--no-validate", dest="validate", action="store_false",
                    help="skip the emulator's validation (diagnostic runs only; recorded in every row)")
    ap.add_argument("--trace", type=float, default=0,
                    help="sample every stream's TCP state on both ends every TRACE seconds (sstrace.py; kept in the rows)")
    ap.add_argument("--encrypt", action="store_true",
                    help="sluice encrypted (TLS 1.3); by default both ends run --no-encrypt, like iperf3 and the peers")
    ap.add_argument("--title", help="with --plot: added to each panel's title (e.g. the ceiling)")
    ap.add_argument("--base", help="tool 'base': this sluice binary (e.g. main's build), run beside --sluice")
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell, interleaved (streams, then run, then tool)")
    ap.add_argument("--alternate", action="store_true",
                    help="with --repeat: each run goes through every stream count before the next run (4, auto, 4, "
                         "auto, ...), so a drift of the machine's load falls on both alike")
    ap.add_argument("--compare", action="store_true",
                    help="with --report: medians per cell of sluice and base, their ratio, and each one's goodput "
                         "against its best with fewer streams (bench/wan/compare.py)")
    ap.add_argument("--one-session", dest="own_sessions", action="store_false",
                    help="start both ends from this script's session, as run.py did before session 19 (figures "
                         "taken so are not comparable with those of ends in sessions of their own, the default)")
    a = ap.parse_args()
    if a.report and a.compare:
        import compare
        return compare.report(a.report.split(","), a.plot, a.title)
    if a.report:
        return wan_report.report(a)
    a.rtts = [float(x) for x in a.rtts.split(",")]
    a.losses = [float(x) for x in a.losses.split(",")]
    a.streams = a.streams.split(",")  # counts, or "auto" (sluice only)
    a.cc = a.cc.split(",")
    a.tools = a.tools.split(",")
    a.file = str(Path(a.data_dir) / "wan-1g.bin")
    a.encrypt = [] if a.encrypt else ["--no-encrypt"]
    try:
        run_matrix(a)
    except wan.ValidationError as e:
        print(f"run: emulator validation failed: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
