#!/usr/bin/env python3
"""Where the CPU goes on a long link (issue 16, h16h): sluice beside iperf3 at N streams.

One emulator (wan.py; RTT, tbf rate, loss on A->B), then for each tool in turn: start both
ends, let them run --warm seconds (slow start), then over --seconds measure both processes'
CPU (/proc utime + stime, io-wq workers included) and the bytes acknowledged (ss) for CPU s/GB
in steady state, with `perf stat` counting syscalls, context switches and io_uring requests
(per GB, each end on its own: the receiver's io_uring completions per GB are its receives and
their timeouts), and the delay line's dropped frames over the tool's whole run and over the
measured seconds; then `perf record -g` on both processes for --record seconds (kept in --out-dir for
`perf report`). Tools: sluice (--sluice), base (--base, another sluice binary), iperf3.

    /work/brief/bin/bench-lock python3 bench/wan/profile.py --rtts 150,20 --streams 64 \\
        --tools sluice,iperf3 --data-dir /work/data/h16h --out-dir /work/data/h16h/prof
"""
import argparse
import json
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wan_movers  # noqa: E402
import wan  # noqa: E402

EVENTS = ["raw_syscalls:sys_enter", "context-switches", "io_uring:io_uring_submit_req",
          "io_uring:io_uring_queue_async_work", "io_uring:io_uring_complete"]


def send_options(tool):
    """A tool spec's sluice send options: 'sluice+send-path=sendfile+pace' is --send-path sendfile --pace."""
    out = []
    for o in tool.split("+")[1:]:
        k, _, v = o.partition("=")
        out += [f"--{k}", v] if v else [f"--{k}"]
    return out


def start(w, a, tool, binary, token_file, recv_path):
    """Both ends of one transfer: (sender, receiver, port), the receiver listening."""
    if tool == "iperf3":
        port = 5299
        recv = w.popen("b", ["iperf3", "-s", "-1", "-p", port, "-B", wan.ADDR_B], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    else:
        port = run.PORT
        rx = Path(a.data_dir) / "rx"
        rx.mkdir(parents=True, exist_ok=True)
        recv = w.popen("b", [binary, "recv", "--port", port, "--bind", wan.ADDR_B, "--token-file", token_file,
                             "--recv-path", recv_path, "--cc", a.cc, "--json", "--idle-timeout", 30, "--no-encrypt", rx],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if w.ex("b", ["ss", "-Hltn", f"sport = :{port}"], check=False).stdout.strip():
            break
        time.sleep(0.05)
    total = a.warm + a.seconds + a.record + 5
    if tool == "iperf3":
        send = w.popen("a", ["iperf3", "-c", wan.ADDR_B, "-p", port, "-C", a.cc, "-P", a.streams, "-t", total],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        send = w.popen("a", [binary, "send", "--streams", a.streams, "--cc", a.cc, "--no-encrypt", "--to",
                             f"{wan.ADDR_B}:{port}", "--token-file", token_file, *send_options(tool), a.file],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return send, recv, port


def open_streams(w, port):
    """Established connections from A to port (data streams plus the control connection)."""
    r = w.ex("a", ["ss", "-Htn", "state", "established", f"( dport = :{port} )"], check=False)
    return max(0, len(r.stdout.strip().splitlines()) - 1)


def perf_counts(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(\S+)", line)
        if m and m.group(2) in EVENTS:
            out[m.group(2)] = int(m.group(1).replace(",", ""))
    return out


def measure(w, a, tool, binary, token_file, rtt, recv_path):
    """One tool's steady-state figures (None when it did not get that far)."""
    line0 = w.counters()["ab"]
    res = None
    send, recv, port = start(w, a, tool, binary, token_file, recv_path)
    try:
        # iperf3 opens its streams one after another (64 x 150 ms is ~10 s): warm up from the
        # moment all are open, so that both tools are measured in the same state.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and open_streams(w, port) < int(a.streams):
            time.sleep(0.2)
        time.sleep(a.warm)
        pids = f"{send.pid},{recv.pid}"
        l0 = w.counters()["ab"]
        c0 = [wan_movers.cpu_seconds(p.pid) for p in (send, recv)]
        b0 = wan_movers.ss_totals(w, "a", port)
        stats = [subprocess.Popen(["perf", "stat", "-x", " ", "-e", ",".join(EVENTS), "-p", str(p.pid), "--", "sleep",
                                   str(a.seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for p in (send, recv)]
        t0 = time.monotonic()
        errs = [st.communicate(timeout=a.seconds + 30)[1] for st in stats]
        dt = time.monotonic() - t0
        c1 = [wan_movers.cpu_seconds(p.pid) for p in (send, recv)]
        b1 = wan_movers.ss_totals(w, "a", port)
        l1 = w.counters()["ab"]
        threads = {n: len(list(Path(f"/proc/{p.pid}/task").iterdir())) for n, p in (("send", send), ("recv", recv))}
        data = Path(a.out_dir) / f"{tool}-{recv_path or 'x'}-{rtt}ms-{a.streams}.data"
        who = ["-a"] if a.record_all else ["-p", pids]  # -a: the delay line and softirq work too
        subprocess.run(["perf", "record", "-q", "-g", "-F", str(a.freq), "-o", data, *who, "--", "sleep",
                        str(a.record)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=a.record + 60)
        acked = b1[0] - b0[0]
        gb = acked / 1e9 if acked else None
        each = [perf_counts(e) for e in errs]
        counts = {k: each[0].get(k, 0) + each[1].get(k, 0) for k in set(each[0]) | set(each[1])}
        per_gb = (lambda c: {k: round(v / gb) for k, v in c.items()} if gb else c)
        res = {"tool": tool, "binary": binary or "", "rtt_ms": rtt, "streams": a.streams, "cc": a.cc,
               "seconds": round(dt, 2), "bytes": acked, "mbit": acked * 8 / dt / 1e6,
               "cpu_send_s": c1[0] - c0[0], "cpu_recv_s": c1[1] - c0[1],
               "cpu_per_s": (sum(c1) - sum(c0)) / dt, "retrans_bytes": b1[1] - b0[1],
               "cpu_s_per_gb": (sum(c1) - sum(c0)) / gb if gb else None, "threads": threads,
               "per_gb": per_gb(counts), "send_per_gb": per_gb(each[0]), "recv_per_gb": per_gb(each[1]),
               "recv_path": recv_path,
               "line_drops_measured": l1.get("sock_drops", 0) - l0.get("sock_drops", 0),
               "perf_data": str(data)}
    finally:
        for p in (send, recv):
            if p.poll() is None:
                p.kill()
            p.wait()
        if tool != "iperf3":  # a partial transfer's files
            subprocess.run(["rm", "-rf", str(Path(a.data_dir) / "rx")], check=False)
        line1 = w.counters()["ab"]
        if res is not None:
            res["line_drops_run"] = line1.get("sock_drops", 0) - line0.get("sock_drops", 0)
            print(json.dumps(res), flush=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rtts", default="150")
    ap.add_argument("--rate", type=float, default=600.0)
    ap.add_argument("--loss", type=float, default=0.0, help="random loss A->B, percent")
    ap.add_argument("--streams", default="64")
    ap.add_argument("--cc", default="bbr")
    ap.add_argument("--tools", default="sluice,iperf3",
                    help="sluice, base, iperf3; sluice's and base's may carry send options: sluice+send-path=sendfile+pace")
    ap.add_argument("--recv-paths", default="null",
                    help="sluice's receive paths, each in turn: null (discard), direct (the default, to "
                         "--data-dir/rx on disk), recv_write")
    ap.add_argument("--sluice", default=str(Path(__file__).resolve().parents[2] / "build/tools/sluice"))
    ap.add_argument("--base", help="tool 'base': this sluice binary")
    ap.add_argument("--warm", type=float, default=4.0, help="seconds before measuring (slow start)")
    ap.add_argument("--seconds", type=float, default=5.0, help="seconds measured (CPU, bytes, perf stat)")
    ap.add_argument("--record", type=float, default=4.0, help="seconds of perf record -g after that")
    ap.add_argument("--freq", type=int, default=499)
    ap.add_argument("--record-all", action="store_true",
                    help="perf record the whole machine (-a), not only the two ends: where the delay line's CPU goes")
    ap.add_argument("--size", type=int, default=1 << 30)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--out", help="append the JSON lines here too")
    a = ap.parse_args()
    Path(a.out_dir).mkdir(parents=True, exist_ok=True)
    a.file = str(Path(a.data_dir) / "wan-1g.bin")
    if not Path(a.file).exists() or Path(a.file).stat().st_size != a.size:
        subprocess.run(["dd", "if=/dev/urandom", f"of={a.file}", "bs=1M", f"count={a.size >> 20}", "status=none"],
                       check=True)
    subprocess.run(["cat", a.file], stdout=subprocess.DEVNULL, check=True)  # in the page cache
    token_file = Path(a.data_dir) / "token"
    token_file.write_text(secrets.token_hex(16))
    token_file.chmod(0o600)
    out = open(a.out, "a") if a.out else None
    for rtt in (float(x) for x in a.rtts.split(",")):
        w = wan.Wan(prefix="slwanp", delay_ab=rtt / 2, delay_ba=rtt / 2, loss_ab=a.loss / 100, rate_mbit=a.rate,
                    log=lambda m: print(m, flush=True))
        with w:
            print(f"profile: ping {w.ping_rtt_ms():.2f} ms (set {rtt})", flush=True)
            for tool in a.tools.split(","):
                binary = {"sluice": a.sluice, "base": a.base}.get(tool.split("+")[0])
                for path in (a.recv_paths.split(",") if tool != "iperf3" else [""]):
                    res = measure(w, a, tool, binary, str(token_file), rtt, path)
                    if res and out:
                        out.write(json.dumps(res) + "\n")
                        out.flush()


if __name__ == "__main__":
    main()
