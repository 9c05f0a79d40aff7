"""The runs of bench/wan/run.py's matrix, one mover each: sluice (run_sluice), plain TCP as one
whole transfer (run_tcp, tcpbound.py), iperf3 (run_iperf3); each bounded in time, each returning
one row. Every end runs in a session of its own (wan.Wan(own_sessions=True), run.py): with
autogroups on, one session for both ends weighted each end's CPU by its thread count (h15k)."""
import contextlib
import json
import os
import re
import shlex
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
