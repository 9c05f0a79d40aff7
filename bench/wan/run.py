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
import contextlib
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
import sstrace  # noqa: E402
import wan  # noqa: E402

PORT = 7016
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a live process (the sluice CLI; `ip netns exec` execs it, same pid)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def ss_totals(w, side, port):
    """bytes_acked and bytes_retrans summed over side's connections to/from port."""
    key = "dport" if side == "a" else "sport"
    r = w.ex(side, ["ss", "-Htin", "state", "established", f"( {key} = :{port} )"], check=False)
    acked = sum(int(x) for x in re.findall(r"bytes_acked:(\d+)", r.stdout))
    retrans = sum(int(x) for x in re.findall(r"bytes_retrans:(\d+)", r.stdout))
    received = sum(int(x) for x in re.findall(r"bytes_received:(\d+)", r.stdout))
    return acked, retrans, received


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def cold_bytes(err):
    """What the sender read with O_DIRECT (not in the page cache), from its -v line; None if unsaid."""
    m = re.search(r"read with O_DIRECT \(not in the page cache\): \d+ blocks \((\d+) bytes", err)
    return int(m.group(1)) if m else None


def run_sluice(w, a, cc, streams, token_file, binary=None):
    """cc may carry send options after '+': 'bbr+pace' is --cc bbr --pace, 'bbr+no-pace' --cc bbr --no-pace."""
    binary = binary or a.sluice
    cc, *extra = cc.split("+")
    extra = [f"--{x}" for x in extra]
    rx_dir = Path(a.data_dir) / "rx"
    rx_dir.mkdir(parents=True, exist_ok=True)
    recv = w.popen("b", [binary, "recv", "--port", PORT, "--bind", wan.ADDR_B, "--token-file", token_file,
                         "--recv-path", "null", "--cc", cc, "--json", "--idle-timeout", 30, *a.encrypt, rx_dir],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    send = None
    try:
        for _ in range(100):
            if w.ex("b", ["ss", "-Hltn", f"sport = :{PORT}"], check=False).stdout.strip():
                break
            time.sleep(0.05)
        t0 = time.monotonic()
        verbose = ["-v"]  # what auto and the pacer chose and why, even for a partial run
        send = w.popen("a", [binary, "send", "--streams", streams, "--cc", cc, "--json", *a.encrypt, "--to",
                             f"{wan.ADDR_B}:{PORT}", "--token-file", token_file, *verbose, *extra, *shlex.split(a.send_args),
                             a.file],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        log = StampedLines(send.stderr, t0)
        send.stderr = None  # read by log's thread alone; communicate() reads stdout
        try:
            with trace_of(w, a, PORT) as tr:
                out, _ = send.communicate(timeout=a.seconds)
                err = log.text()
        except subprocess.TimeoutExpired:
            # Bounded: measure what moved by now, then stop both ends.
            elapsed = time.monotonic() - t0
            acked, retrans, _ = ss_totals(w, "a", PORT)
            cpu_recv = cpu_seconds(recv.pid)
            cpu = cpu_seconds(send.pid) + cpu_recv
            if acked == 0:
                # No data connection open: the sender is past its data, waiting for the
                # verdict. Let it finish (a few seconds more) and report it whole.
                try:
                    out, _ = send.communicate(timeout=5)
                    err = log.text()
                except subprocess.TimeoutExpired:
                    return {"error": f"no data connection open at the time bound ({elapsed:.1f} s)"}
            else:
                send.kill()
                send.communicate()
                err = log.text()
                return {"complete": False, "seconds": elapsed, "bytes": acked, "retrans_bytes": retrans,
                        **traced(tr),
                        "cpu_s": cpu, "cpu_recv_s": cpu_recv,  # the receiver's alone (its wake-ups: the low-water mark)
                        "note": "partial: measured from ss and /proc at the time bound",
                        "auto": [l for l in err.splitlines() if "streams auto" in l],
                        "pacing_lines": [l for l in err.splitlines() if "pacing:" in l], **log.row(a),
                        "cold_bytes": cold_bytes(err)}
        if send.returncode != 0:
            return {"error": f"sluice send exit {send.returncode}: {err.strip()[-300:]}"}
        s = last_json(out)
        rout, _ = recv.communicate(timeout=30)
        r = last_json(rout) or {}
        return {"complete": True, "seconds": s["seconds"], "bytes": s["bytes_sent"], **traced(tr),
                "retrans_bytes": s["bytes_retrans"], "cpu_s": s["cpu_user_s"] + s["cpu_sys_s"] +
                r.get("cpu_user_s", 0) + r.get("cpu_sys_s", 0), "cpu_recv_s": r.get("cpu_user_s", 0) + r.get("cpu_sys_s", 0),
                "cc_seen": s["congestion_control"],
                "window_limits": s["window_limits"] + r.get("window_limits", []),
                "streams_used": s.get("streams_used"), "streams_choice": s.get("streams_choice", ""),
                "pacing": s.get("pacing", ""),
                # where the streams' time went (TCP_INFO): held by the receiver's window, by the send buffer
                "busy_us": sum(t["busy_us"] for t in s["tcp_streams"]),
                "rwnd_limited_us": sum(t["rwnd_limited_us"] for t in s["tcp_streams"]),
                "sndbuf_limited_us": sum(t["sndbuf_limited_us"] for t in s["tcp_streams"]), **log.row(a),
                "cold_bytes": cold_bytes(log.text())}
    finally:
        for p in (send, recv):
            if p and p.poll() is None:
                p.kill()
            if p:
                p.wait()


class StampedLines:
    """The sender's stderr read on a thread, each line with the seconds since t0 (the sender's
    start) at which it came: with --log, the -v timeline of a run (connect, the search, the
    pacer, the end) for a time budget. communicate() then sees stderr as already read."""

    def __init__(self, pipe, t0):
        self.lines, self.t0 = [], t0
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe):
        for line in pipe:
            self.lines.append((round(time.monotonic() - self.t0, 3), line.rstrip("\n")))

    def text(self):
        self.thread.join(timeout=5)
        return "\n".join(l for _, l in self.lines)

    def row(self, a):
        return {"log": self.lines} if a.log else {}


def trace_of(w, a, port):
    """--trace: per-stream ss samples on both ends while the run goes (sstrace.py), else nothing."""
    if not a.trace:
        return contextlib.nullcontext(None)
    return sstrace.SsTrace(w, port, every=a.trace, limit=int(a.seconds / a.trace) + 40)


def traced(tr):
    return {"trace": tr.summary()} if tr else {}


def run_tcp(w, a, cc, streams, lowat=0):
    """tcpbound.py: plain TCP sockets moving the same file as one whole transfer (connect to the
    receiver's last close), chunks handed to whichever socket is free: the floor under sluice."""
    tool = str(Path(__file__).resolve().parent / "tcpbound.py")
    port = PORT + 1
    recv = w.popen("b", ["python3", tool, "recv", "--bind", f"{wan.ADDR_B}:{port}", "--streams", streams, "--cc", cc,
                         "--timeout", a.seconds + 10], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        peers.wait_listening(w, port)
        with trace_of(w, a, port) as tr:
            r = w.ex("a", ["python3", tool, "send", "--to", f"{wan.ADDR_B}:{port}", "--streams", streams, "--cc", cc,
                           "--timeout", a.seconds, "--lowat", lowat, a.file], check=False, timeout=a.seconds + 20)
        out = last_json(r.stdout) or {"error": r.stderr.strip()[-300:]}
        if not out.get("complete"):
            return {"error": out.get("error", "incomplete"), **out}
        return {**out, "retrans_bytes": 0, "cpu_s": 0, **traced(tr),
                "note": "whole transfer, connect to last close; retransmits not measured"}
    finally:
        if recv.poll() is None:
            recv.kill()
        recv.wait()


def run_iperf3(w, a, cc, streams):
    # --iperf-bytes: a transfer of that size, start-up included (what sluice's 1 GiB is), bounded
    # by --iperf-seconds; else a run of --iperf-seconds. CUBIC at 1% loss would take minutes
    # for 1 GiB: --iperf-bytes-cc leaves it (and any cc not listed) on time.
    by_bytes = a.iperf_bytes and cc in a.iperf_bytes_cc
    with trace_of(w, a, 5299) as tr:
        out = w.iperf3(["-C", cc, "-P", streams, *(["-n", a.iperf_bytes] if by_bytes else ["-t", a.iperf_seconds])],
                       a.iperf_bound if by_bytes else a.iperf_seconds)
    end = out["end"]
    # By bytes the receiver's clock: the sender's stops once it has written the last byte into
    # its socket, up to a few BDPs before the receiver has it.
    secs = end["sum_received" if by_bytes else "sum_sent"]["seconds"]
    cpu = end["cpu_utilization_percent"]
    return {"complete": True, "seconds": secs, "bytes": end["sum_received"]["bytes"],
            # iperf3 counts retransmitted segments; at MSS 1448 that is bytes (all segments here are full)
            "retrans_bytes": end["sum_sent"].get("retransmits", 0) * wan.MSS,
            "cpu_s": (cpu["host_total"] + cpu["remote_total"]) / 100 * secs, **traced(tr),
            "iperf_by": "bytes" if by_bytes else "seconds", "sent_seconds": end["sum_sent"]["seconds"],
            "sent_bytes": end["sum_sent"]["bytes"]}


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
                    log=lambda m: print(m, flush=True), bottleneck=a.bottleneck)
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
                            res.update(validated=a.validate, run=rep,
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


def stream_key(n):
    """Counts in order, "auto" after them."""
    return (0, n) if isinstance(n, int) else (1, 0)


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def report(a):
    """Markdown table: goodput Mbit/s (* partial: still running at the time bound, measured from
    ss), retransmitted bytes as % of goodput bytes, CPU s/GB, and frames the emulator itself
    dropped (its queue or socket: an emulator limit, not the path's loss)."""
    rows = [json.loads(l) for l in open(a.report) if l.strip()]
    print("| RTT ms | loss % | streams | sluice cubic | sluice bbr | iperf3 cubic | iperf3 bbr | "
          "retrans % (s cubic / s bbr / i cubic / i bbr) | CPU s/GB (s bbr / i bbr) | line drops | s/i bbr |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    cells = {}
    for r in rows:  # a cell run again later replaces the earlier one
        cells[(r["rtt_ms"], r["loss_pct"], r["streams"], r["tool"], r["cc"])] = r
    keys = sorted({(r["rtt_ms"], r["loss_pct"], r["streams"]) for r in rows}, key=lambda k: (k[0], k[1], stream_key(k[2])))
    order = [("sluice", "cubic"), ("sluice", "bbr"), ("iperf3", "cubic"), ("iperf3", "bbr")]
    for k in keys:
        got = [cells.get(k + o) for o in order]
        gp = []
        for g in got:
            if not g or "goodput_mbit" not in g:
                gp.append("error" if g else "-")
            else:
                gp.append(fmt(g["goodput_mbit"], 1) + ("" if g.get("complete") else "*"))
        rt = " / ".join(fmt(g.get("retrans_pct"), 2) if g else "-" for g in got)
        cpu = " / ".join(fmt(g.get("cpu_s_per_gb"), 2) if g else "-" for g in (got[1], got[3]))
        drops = [g["line_drops"] for g in got if g and "line_drops" in g]
        ratio = got[1]["goodput_mbit"] / got[3]["goodput_mbit"] if got[1] and got[3] and \
            got[1].get("goodput_mbit") and got[3].get("goodput_mbit") else None
        print(f"| {k[0]:g} | {k[1]:g} | {k[2]} | " + " | ".join(gp) + f" | {rt} | {cpu} | " +
              (str(sum(drops)) if drops else "n/a") + f" | {fmt(ratio, 2)} |")
    peer_rows = [r for r in cells.values() if r["tool"] not in ("sluice", "iperf3")]
    if peer_rows:
        print("\n| RTT ms | loss % | streams | peer | cc | goodput Mbit/s | sluice same cc, same streams |")
        print("|---|---|---|---|---|---|---|")
        for r in sorted(peer_rows, key=lambda r: (r["rtt_ms"], r["loss_pct"], stream_key(r["streams"]), r["tool"], r["cc"])):
            s = cells.get((r["rtt_ms"], r["loss_pct"], r["streams"], "sluice", r["cc"]))
            gp = fmt(r.get("goodput_mbit"), 1) + ("" if r.get("complete") else "*") if "goodput_mbit" in r else "error"
            sg = fmt(s.get("goodput_mbit"), 1) + ("" if s.get("complete") else "*") if s and "goodput_mbit" in s else "-"
            print(f"| {r['rtt_ms']:g} | {r['loss_pct']:g} | {r['streams']} | {r['tool']} | {r['cc']} | {gp} | {sg} |")
    if a.plot:
        plot([r for r in cells.values() if r["tool"] in ("sluice", "iperf3")], a.plot, order,
             f" ({a.title})" if a.title else "")


def plot(rows, path, order, a_title=""):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rtts = sorted({r["rtt_ms"] for r in rows})
    losses = sorted({r["loss_pct"] for r in rows})
    fig, axes = plt.subplots(len(rtts), len(losses), figsize=(4 * len(losses), 3.2 * len(rtts)), squeeze=False)
    styles = {("sluice", "cubic"): "C0-o", ("sluice", "bbr"): "C1-o", ("iperf3", "cubic"): "C0--s",
              ("iperf3", "bbr"): "C1--s"}
    for i, rtt in enumerate(rtts):
        for j, loss in enumerate(losses):
            ax = axes[i][j]
            for tool, cc in order:
                mine = [r for r in rows if r["rtt_ms"] == rtt and r["loss_pct"] == loss and r["tool"] == tool and
                        r["cc"] == cc and r.get("goodput_mbit", 0) > 0]
                pts = sorted((r["streams"], r["goodput_mbit"]) for r in mine if isinstance(r["streams"], int))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[(tool, cc)], label=f"{tool} {cc}")
                # traced rows (--trace): the rate past start-up as a thin line of its own
                steady = sorted((r["streams"], sstrace.steady_mbit(r)) for r in mine
                                if isinstance(r["streams"], int) and r.get("trace") and sstrace.steady_mbit(r))
                if steady:
                    mark = "x:" if tool == "sluice" else "+:"
                    ax.plot([p[0] for p in steady], [p[1] for p in steady], styles[(tool, cc)][:2] + mark,
                            linewidth=1, label=f"{tool} {cc} steady")
                for r in mine:  # --streams auto: a level line across the counts
                    if r["streams"] == "auto":
                        ax.axhline(r["goodput_mbit"], color=styles[(tool, cc)][:2], linestyle=":",
                                   label=f"{tool} {cc} auto")
            ax.set_xscale("log", base=2)
            ticks = sorted({r["streams"] for r in rows if isinstance(r["streams"], int)})
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_yscale("log")
            ax.set_title(f"RTT {rtt:g} ms, loss {loss:g}%{a_title}")
            ax.set_xlabel("streams")
            ax.set_ylabel("goodput Mbit/s")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


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
    a = ap.parse_args()
    if a.report and a.compare:
        import compare
        return compare.report(a.report.split(","), a.plot, a.title)
    if a.report:
        return report(a)
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
