"""Run helpers of the data-paths bench (run.py): the payload and receive directory, one timed
run (wall time, CPU and peak RSS per side) or traced run (copies per byte per side), and the
command lines of sluice and the peers."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

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


class Runner:
    """Set-up, one timed or traced run, and the commands of sluice and the peers; the sections
    (sections.py) are built from these."""

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
