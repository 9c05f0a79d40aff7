#!/usr/bin/env python3
"""Every data path measured (issue 4), on loopback, side by side with the peers in one run.

Sections (all by default; pick with --sections):
  goals   the issue's goals, --goal-rounds rounds interleaved: default sender into the discard
          sink vs `iperf3 -Z -F FILE` (1 and default streams); default file-to-file vs nc
  streams default paths file-to-file over stream counts (and block 2M/32M), --goal-rounds rounds
  send    each send path (splice, sendfile, zc, read_send) into the discard sink
          (`sluice recv --sink null`), at each stream count, with `iperf3 -Z -F FILE`,
          `iperf3 -F FILE` and `nc < FILE` into `nc -l > /dev/null` at the same place in the order
  recv    each receive path (direct, recv_write, splice) into a directory on the same disk, from
          the fastest sender of the send section, at each stream count; `nc < FILE` into
          `nc -l > FILE` beside it
  combo   every send path x receive path at the default stream count
  cold    page cache dropped (echo 3 > /proc/sys/vm/drop_caches) before each run: each send path
          into the discard sink, the default file-to-file transfer, and the peers
  memory  peak RSS per side of default file-to-file transfers over streams x block size
  trace   CPU copies per byte per side from `sluice trace` (a separate, smaller transfer per
          configuration: tracing costs CPU, so these runs are not timed)

Each run: wall time from the sender's start to both processes' exit; CPU and peak RSS are
each process's own rusage (wait4), so nothing else on the machine is counted. Rounds alternate
the order. Results: OUT/results.json, OUT/results.md (tables), docs-ready plot OUT/data-paths.png.
Run as root (drop_caches, tracing), holding the bench lock:
  flock /run/sluice-bench.lock python3 bench/data-paths/run.py
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEND_PATHS = ["splice", "sendfile", "zc", "read_send"]
RECV_PATHS = ["direct", "recv_write", "splice"]


def parse_size(s):
    return int(s[:-1]) << {"K": 10, "M": 20, "G": 30}[s[-1]] if s[-1] in "KMG" else int(s)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        # A listening socket shows in /proc/net/tcp* (state 0A); connecting would disturb iperf3.
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):  # iperf3 listens on ::
            with open(table) as f:
                if any(l.split()[1].endswith(f":{port:04X}") and l.split()[3] == "0A" for l in f.readlines()[1:]):
                    return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port}")


class Bench:
    def __init__(self, a):
        self.a = a
        self.out = Path(a.out)
        self.size = parse_size(a.size)
        self.src = self.out / "payload.bin"
        self.dst = self.out / "dst"
        self.sluice = str(self.out / "sluice")
        self.results = []

    # --- set-up -------------------------------------------------------------------------
    def prepare(self):
        self.out.mkdir(parents=True, exist_ok=True)
        self.dst.mkdir(exist_ok=True)
        # A copy of the binary: a rebuild landing mid-bench must not change what is measured.
        shutil.copy2(self.a.sluice, self.sluice)
        if not self.src.exists() or self.src.stat().st_size != self.size:
            with open(self.src, "wb") as f:
                left = self.size
                while left:
                    n = min(left, 64 << 20)
                    f.write(os.urandom(n))
                    left -= n
        self.warm()

    def source(self):
        """The payload for the current run size: payload.bin, or a prefix of it in its own file."""
        if self.run_size == self.size:
            return str(self.src)
        p = self.out / f"payload-{self.run_size}.bin"
        if not p.exists() or p.stat().st_size != self.run_size:
            subprocess.run(f"head -c {self.run_size} {self.src} > {p}", shell=True, check=True)
        return str(p)

    def warm(self):
        subprocess.run(["cat", str(self.src)], stdout=subprocess.DEVNULL, check=True)

    def clean_dst(self):
        # Deleting the previous output drops its dirty pages; sync so no writeback of one run
        # lands in the next.
        subprocess.run(["rm", "-rf", str(self.dst)], check=True)
        self.dst.mkdir()
        os.sync()

    @staticmethod
    def drop_caches():
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")

    # --- one run ------------------------------------------------------------------------
    def pair(self, recv_cmd, send_cmd, sluice_rx, trace):
        """A traced run: each side under its own `sluice trace` (not timed)."""
        port = free_port()
        recv_cmd = [x.replace("{port}", str(port)) for x in recv_cmd]
        recv_cmd = [self.sluice, "trace", "--json", "-o", trace + ".recv.json", "--payload", str(self.run_size), "--", *recv_cmd]
        rx = subprocess.Popen(recv_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        url = ""
        if sluice_rx:
            url = rx.stdout.readline().strip()
            if not url.startswith("sluice://"):
                raise RuntimeError(f"receiver did not start: {recv_cmd}: {url} {rx.stderr.read()}")
        else:
            wait_listening(port)
        send_cmd = [x.replace("{url}", url).replace("{port}", str(port)) for x in send_cmd]
        send_cmd = [self.sluice, "trace", "--json", "-o", trace + ".send.json", "--payload", str(self.run_size), "--", *send_cmd]
        tx = subprocess.Popen(send_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, tx_err = tx.communicate(timeout=self.a.timeout)
        _, rx_err = rx.communicate(timeout=self.a.timeout)
        if tx.returncode or rx.returncode:
            raise RuntimeError(f"traced run failed: {send_cmd} / {recv_cmd}: {tx_err} {rx_err}")

    def measure(self, section, name, send_cmd, recv_cmd, sluice_tx, sluice_rx, streams, block=None, size=None, extra=None):
        self.run_size = size or self.size
        rec = run_timed(self, recv_cmd, send_cmd, sluice_rx)
        rec.update(section=section, name=name, streams=streams, block=block, bytes=self.run_size, **(extra or {}))
        if sluice_tx:
            st = json.loads(rec.pop("tx_out").strip().splitlines()[-1])
            rec["send_path"], rec["send_fallbacks"] = st["send_path"], st["fallbacks"]
        else:
            rec.pop("tx_out")
        if sluice_rx:
            st = json.loads(rec.pop("rx_out").strip().splitlines()[-1])
            rec["recv_path"], rec["recv_fallbacks"] = st["recv_path"], st["fallbacks"]
        else:
            rec.pop("rx_out")
        gb = self.run_size / 1e9
        rec["mb_s"] = self.run_size / rec["seconds"] / 1e6
        rec["cpu_s_gb_send"] = rec["cpu_send"] / gb
        rec["cpu_s_gb_recv"] = rec["cpu_recv"] / gb
        self.results.append(rec)
        print(f"{section:6} {name:40} {streams:>2} streams: {rec['mb_s']:6.0f} MB/s  CPU s/GB send {rec['cpu_s_gb_send']:.3f} "
              f"recv {rec['cpu_s_gb_recv']:.3f}  RSS MiB {rec['rss_send_kb'] >> 10}/{rec['rss_recv_kb'] >> 10}", file=sys.stderr, flush=True)
        return rec

    # --- commands -------------------------------------------------------------------------
    def sluice_send(self, path, streams, block=None):
        cmd = [self.sluice, "send", self.source(), "{url}", "--streams", str(streams), "--json"]
        if path:
            cmd += ["--send-path", path]
        if block:
            cmd += ["--block-size", block]
        return cmd

    def sluice_recv(self, path):
        cmd = [self.sluice, "recv", str(self.dst), "--bind", "127.0.0.1", "--port", "{port}", "--json"]
        if path == "null":
            cmd += ["--sink", "null"]
        elif path:
            cmd += ["--recv-path", path]
        return cmd

    def peer(self, name, streams):
        src, n = self.source(), str(self.run_size)
        if name.startswith("iperf3"):
            rx = ["iperf3", "-s", "-1", "-p", "{port}"]
            tx = ["iperf3", "-c", "127.0.0.1", "-p", "{port}", "-n", n, "-F", src, "-P", str(streams)]
            return rx, tx + (["-Z"] if "-Z" in name else [])
        if name == "nc -> /dev/null":
            return ["sh", "-c", "exec nc -l -p {port} > /dev/null"], ["sh", "-c", f"exec nc -N 127.0.0.1 {{port}} < {src}"]
        if name == "nc -> file":
            return (["sh", "-c", f"exec nc -l -p {{port}} > {self.dst}/payload.bin"],
                    ["sh", "-c", f"exec nc -N 127.0.0.1 {{port}} < {src}"])
        raise ValueError(name)

    def run_peer(self, section, name, streams, size=None):
        self.run_size = size or self.size
        rx, tx = self.peer(name, streams)
        if name == "nc -> file":
            self.clean_dst()
        return self.measure(section, name, tx, rx, False, False, streams if name.startswith("iperf3") else 1, size=size)

    def run_sluice(self, section, send_path, recv_path, streams, block=None, size=None):
        self.run_size = size or self.size
        if recv_path != "null":
            self.clean_dst()
        name = f"sluice {send_path or 'default'} -> {recv_path or 'default'}"
        return self.measure(section, name, self.sluice_send(send_path, streams, block), self.sluice_recv(recv_path),
                            True, True, streams, block=block, size=size)

    # --- sections ---------------------------------------------------------------------------
    def sec_goals(self):
        """The issue's two goals, interleaved over --goal-rounds: the default sender into the
        discard sink vs iperf3 -Z -F, and the default file-to-file transfer vs nc."""
        ds = self.a.default_streams
        runs = [("sluice", "null"), ("peer", "iperf3 -Z -F FILE", 1), ("peer", "iperf3 -Z -F FILE", ds),
                ("sluice", None), ("peer", "nc -> file", 1)]
        for r in range(self.a.goal_rounds):
            for run in (runs if r % 2 == 0 else runs[::-1]):
                if run[0] == "sluice":
                    self.run_sluice("goals", None, run[1], ds)
                else:
                    self.run_peer("goals", run[1], run[2])

    def sec_streams(self):
        """The default stream count's measurement: default paths file-to-file at each stream
        count and at 1/4/8x the default block size, --goal-rounds rounds interleaved."""
        runs = [(st, None) for st in self.a.streams] + [(self.a.default_streams, b) for b in ("2M", "32M")]
        for r in range(self.a.goal_rounds):
            for st, b in (runs if r % 2 == 0 else runs[::-1]):
                self.run_sluice("streams", None, None, st, block=b)

    def sec_send(self):
        for r in range(self.a.rounds):
            for streams in self.a.streams:
                runs = [("sluice", p) for p in SEND_PATHS] + [("peer", "iperf3 -Z -F FILE"), ("peer", "iperf3 -F FILE")]
                if streams == 1:
                    runs.append(("peer", "nc -> /dev/null"))
                for kind, what in (runs if r % 2 == 0 else runs[::-1]):
                    if kind == "sluice":
                        self.run_sluice("send", what, "null", streams)
                    else:
                        self.run_peer("send", what, streams)

    def fastest_sender(self):
        if self.a.fast_sender:
            return self.a.fast_sender
        rows = [x for x in self.results if x["section"] == "send" and x["name"].startswith("sluice")]
        if not rows:
            return "splice"
        best = {}
        for x in rows:
            best.setdefault(x["send_path"], []).append(x["mb_s"])
        return max(best, key=lambda p: statistics.median(best[p]))

    def sec_recv(self):
        fast = self.fastest_sender()
        for r in range(self.a.rounds):
            for streams in self.a.streams:
                runs = [("sluice", p) for p in RECV_PATHS] + ([("peer", "nc -> file")] if streams == 1 else [])
                for kind, what in (runs if r % 2 == 0 else runs[::-1]):
                    if kind == "sluice":
                        self.run_sluice("recv", fast, what, streams)
                    else:
                        self.run_peer("recv", what, 1)

    def sec_combo(self):
        for r in range(self.a.rounds):
            runs = [(s, p) for s in SEND_PATHS for p in RECV_PATHS] + [(None, None), ("peer", "nc -> file")]
            for s, p in (runs if r % 2 == 0 else runs[::-1]):
                if s == "peer":
                    self.run_peer("combo", p, 1)
                else:
                    self.run_sluice("combo", s, p, self.a.default_streams)

    def sec_cold(self):
        size = parse_size(self.a.cold_size)
        self.run_size = size
        self.source()
        runs = [("sluice", p, "null") for p in SEND_PATHS] + [("sluice", None, None), ("peer", "iperf3 -Z -F FILE", None),
                                                                ("peer", "nc -> /dev/null", None), ("peer", "nc -> file", None)]
        for r in range(self.a.rounds):
            for kind, what, rp in (runs if r % 2 == 0 else runs[::-1]):
                if kind == "sluice" and rp is None:
                    self.clean_dst()
                self.drop_caches()
                if kind == "sluice":
                    self.run_sluice("cold", what, rp, self.a.default_streams, size=size)
                else:
                    self.run_peer("cold", what, self.a.default_streams if what.startswith("iperf3") else 1, size=size)
        self.warm()

    def sec_memory(self):
        size = parse_size(self.a.memory_size)
        for streams in self.a.memory_streams:
            for block in self.a.memory_blocks:
                self.run_sluice("memory", None, None, streams, block=block, size=size)

    def default_paths(self):
        """The paths the defaults ran, from a default run's stats (else from --help)."""
        for r in self.results:
            if r["name"] == "sluice default -> default" and "send_path" in r:
                return r["send_path"], r["recv_path"]
        tx = subprocess.run([self.sluice, "send", "--help"], capture_output=True, text=True).stdout
        rx = subprocess.run([self.sluice, "recv", "--help"], capture_output=True, text=True).stdout
        pick = lambda text, names: next(n for n in names if f"{n} (default" in text)
        return pick(tx, SEND_PATHS), pick(rx, RECV_PATHS)

    def sec_trace(self):
        size = parse_size(self.a.trace_size)
        self.run_size = size
        self.source()
        subprocess.run(["cat", self.source()], stdout=subprocess.DEVNULL, check=True)
        tdir = self.out / "traces"
        tdir.mkdir(exist_ok=True)
        confs = [(p, "null") for p in SEND_PATHS] + [(self.fastest_sender(), p) for p in RECV_PATHS] + [(None, None)]
        for s, p in confs:
            if p != "null":
                self.clean_dst()
            tag = f"sluice-{s or 'default'}-{p or 'default'}"
            self.run_size = size
            t = str(tdir / tag)
            self.pair(self.sluice_recv(p), self.sluice_send(s, self.a.default_streams), True, trace=t)
            ds, dr = self.default_paths()
            row = trace_row(f"sluice {s or 'default'} -> {p or 'default'}", t, size,
                            o_direct_send=(s or ds) == "zc", o_direct_recv=(p or dr) == "direct")
            self.results.append(row)
        for name in ("iperf3 -Z -F FILE", "iperf3 -F FILE", "nc -> /dev/null", "nc -> file"):
            if name == "nc -> file":
                self.clean_dst()
            self.run_size = size
            rx, tx = self.peer(name, 1)
            t = str(tdir / name.replace(" ", "_").replace("/", "_"))
            self.pair(rx, tx, False, trace=t)
            self.results.append(trace_row(name, t, size, False, False))
        self.clean_dst()


def run_timed(b, recv_cmd, send_cmd, sluice_rx):
    """One timed run: CPU from wait4 of each side, peak RSS from GNU time (%M).

    wait4's ru_maxrss is useless here: a child that Python vforks and that then execs keeps
    Python's own peak (~16 MiB) as its floor. GNU time forks from a ~1 MiB process, so its %M
    is the command's own peak plus at most that."""
    port = free_port()
    rss_rx, rss_tx = b.out / "rss.recv", b.out / "rss.send"
    recv_cmd = ["/usr/bin/time", "-f", "%M", "-o", str(rss_rx), *recv_cmd]
    send_cmd = ["/usr/bin/time", "-f", "%M", "-o", str(rss_tx), *send_cmd]
    recv_cmd = [x.replace("{port}", str(port)) for x in recv_cmd]
    rx = subprocess.Popen(recv_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = ""
    if sluice_rx:
        url = rx.stdout.readline().strip()
        if not url.startswith("sluice://"):
            raise RuntimeError(f"receiver did not start: {recv_cmd}: {url} {rx.stderr.read()}")
    else:
        wait_listening(port)
    send_cmd = [x.replace("{url}", url).replace("{port}", str(port)) for x in send_cmd]
    t0 = time.monotonic()
    tx = subprocess.Popen(send_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Outputs are small (a JSON line, iperf3's report): read them after exit.
    _, st_tx, ru_tx = os.wait4(tx.pid, 0)
    _, st_rx, ru_rx = os.wait4(rx.pid, 0)
    secs = time.monotonic() - t0
    tx_out, tx_err = tx.stdout.read(), tx.stderr.read()
    rx_out, rx_err = rx.stdout.read(), rx.stderr.read()
    if os.waitstatus_to_exitcode(st_tx) or os.waitstatus_to_exitcode(st_rx):
        raise RuntimeError(f"run failed: {send_cmd} / {recv_cmd}: {tx_err} {rx_err}")
    return {"seconds": secs, "cpu_send": ru_tx.ru_utime + ru_tx.ru_stime, "cpu_recv": ru_rx.ru_utime + ru_rx.ru_stime,
            "rss_send_kb": int(rss_tx.read_text().split()[-1]), "rss_recv_kb": int(rss_rx.read_text().split()[-1]), "tx_out": tx_out, "rx_out": rx_out}


def trace_row(name, t, size, o_direct_send, o_direct_recv):
    row = {"section": "trace", "name": name, "bytes": size}
    for side in ("send", "recv"):
        rep = json.loads(Path(f"{t}.{side}.json").read_text())
        s = rep["summary"]
        row[f"copies_{side}"] = s["copies_per_byte"]
        row[f"cpu_s_gb_{side}"] = s["cpu_s_per_gb"]
        # O_DIRECT file I/O is DMA, but the tracer counts io_uring read/write ops between user
        # memory and a file as copies: report that share separately (see docs/benchmarks.md).
        direct = 0
        for st in rep["stages"]:
            for f in st["flows"]:
                if f["via"] == "io_uring" and "file" in (f["from"], f["to"]) and f["kind"] in ("copy_in", "copy_out"):
                    direct += f["bytes"]
        row[f"file_io_uring_{side}"] = direct / s["payload_bytes"] if s["payload_bytes"] else 0
        # Paths that read (zc) or write (direct) files with O_DIRECT: that I/O is the disk's DMA.
        o_direct = o_direct_send if side == "send" else o_direct_recv
        row[f"cpu_copies_{side}"] = s["copies_per_byte"] - (row[f"file_io_uring_{side}"] if o_direct else 0)
    print(f"trace  {name:40} copies/B send {row['copies_send']:.2f} recv {row['copies_recv']:.2f}, without O_DIRECT I/O "
          f"{row['cpu_copies_send']:.2f} / {row['cpu_copies_recv']:.2f}", file=sys.stderr, flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="4G", help="file size (default 4G)")
    ap.add_argument("--streams", default="1,2,4,8", help="stream counts (default 1,2,4,8)")
    ap.add_argument("--default-streams", type=int, default=4, help="stream count of combo/cold/trace (default 4)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sections", default="goals,streams,send,recv,combo,cold,memory,trace")
    ap.add_argument("--goal-rounds", type=int, default=3, help="rounds of the goals section (default 3)")
    ap.add_argument("--fast-sender", default="", help="sender of the recv section (default: fastest of the send section)")
    ap.add_argument("--cold-size", default="2G", help="bytes per cold-cache run (default 2G: the disk is slow)")
    ap.add_argument("--memory-size", default="4G")
    ap.add_argument("--memory-streams", default="1,4,8")
    ap.add_argument("--memory-blocks", default="2M,8M,32M")
    ap.add_argument("--trace-size", default="1G")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--sluice", default=str(ROOT / "build/tools/sluice"))
    ap.add_argument("--out", default=str(ROOT / "bench/out/data-paths"))
    a = ap.parse_args()
    a.streams = [int(x) for x in a.streams.split(",")]
    a.memory_streams = [int(x) for x in a.memory_streams.split(",")]
    a.memory_blocks = a.memory_blocks.split(",")
    if os.geteuid() != 0:
        sys.exit("data-paths: run as root (drop_caches, tracing)")
    b = Bench(a)
    b.prepare()
    t0 = time.monotonic()
    sections = a.sections.split(",")
    if "trace" in sections and subprocess.run([b.sluice, "trace", "--help"], capture_output=True).returncode != 0:
        print("data-paths: sluice built without the tracer: trace section skipped", file=sys.stderr)
        sections.remove("trace")
    try:
        for sec in sections:
            getattr(b, "sec_" + sec)()
    finally:
        meta = {"size": b.size, "args": vars(a), "wall_s": time.monotonic() - t0, "kernel": os.uname().release,
                "sluice_version": subprocess.run([b.sluice, "--version"], capture_output=True, text=True).stdout.strip()}
        (b.out / "results.json").write_text(json.dumps({"meta": meta, "results": b.results}, indent=1))
        subprocess.run(["rm", "-rf", str(b.dst)])
    subprocess.run([sys.executable, str(Path(__file__).parent / "report.py"), str(b.out)], check=False)


if __name__ == "__main__":
    main()
