"""What issue 17's benchmarks share: the rsync daemon, loopback or namespaces, one timed run
of each tool, and the results' summary (run.py's jobs import it)."""
import json
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLUICE = os.environ.get("SLUICE_BIN", os.path.join(ROOT, "build", "tools", "sluice"))
MiB, GiB = 1 << 20, 1 << 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_all(path):
    with open(path, "rb") as f:
        while f.read(8 * MiB):
            pass


class RsyncDaemon:
    def __init__(self, root, net=None):
        self.net = net or LOOPBACK
        self.port = free_port()
        self.conf = os.path.join(root, "rsyncd.conf")
        with open(self.conf, "w") as f:
            f.write(f"use chroot = false\nuid = root\ngid = root\n[m]\npath = {root}\nread only = false\n")
        self.proc = subprocess.Popen(self.net.wrap("rcv", ["rsync", "--daemon", "--no-detach", f"--config={self.conf}",
                                                           f"--port={self.port}", f"--address={self.net.ip}"]),
                                     stderr=subprocess.PIPE, env=NS_ENV, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            probe = self.net.wrap("snd", [sys.executable, "-c", "import socket,sys; socket.create_connection((sys.argv[1], "
                                          "int(sys.argv[2])), timeout=1).close()", self.net.ip, str(self.port)])
            if subprocess.run(probe, env=NS_ENV, capture_output=True).returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("rsync daemon did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


NETNS = os.path.join(ROOT, "bench", "testbed", "netns.sh")
NS_ENV = dict(os.environ, SB_NS_SND="sl17-bench-snd", SB_NS_RCV="sl17-bench-rcv", SB_IP_SND="10.217.7.1",
              SB_IP_RCV="10.217.7.2")


class Net:
    """Where the two sides run: loopback, or the two namespaces of bench/testbed/netns.sh."""

    def __init__(self, rate=None):
        self.rate = rate
        self.ip = NS_ENV["SB_IP_RCV"] if rate else "127.0.0.1"
        if rate:
            subprocess.run([NETNS, "up", rate], env=NS_ENV, check=True, capture_output=True)

    def wrap(self, side, cmd):
        return [NETNS, "exec", side, *cmd] if self.rate else cmd

    def down(self):
        if self.rate:
            subprocess.run([NETNS, "down"], env=NS_ENV, capture_output=True)


LOOPBACK = Net()


def sluice_run(src, dest, send_args=(), recv_args=(), binary=None, net=LOOPBACK):
    """One `sluice send SRC` into DEST: (seconds, sender stats, receiver stats)."""
    port = free_port()
    binary = binary or SLUICE
    rx = subprocess.Popen(net.wrap("rcv", [binary, "recv", dest, "--bind", net.ip, "--port", str(port), "--token", "b",
                                           "--json", *recv_args]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=NS_ENV, start_new_session=True)
    url = rx.stdout.readline().strip()
    t0 = time.monotonic()
    tx = subprocess.run(net.wrap("snd", [binary, "send", src, url, "--json", *send_args]), capture_output=True, text=True,
                        timeout=600, env=NS_ENV, start_new_session=True)
    out, err = rx.communicate(timeout=120)
    secs = time.monotonic() - t0
    if tx.returncode or rx.returncode:
        raise RuntimeError(f"sluice: send {tx.returncode} {tx.stderr.strip()}; recv {rx.returncode} {err.strip()}")
    return secs, json.loads(tx.stdout.splitlines()[-1]), json.loads(out.splitlines()[-1])


def rsync_run(daemon, src, rel_dest, *args):
    t0 = time.monotonic()
    r = subprocess.run(daemon.net.wrap("snd", ["rsync", *args, src, f"rsync://{daemon.net.ip}:{daemon.port}/m/{rel_dest}/"]),
                       capture_output=True, text=True, timeout=900, env=NS_ENV, start_new_session=True)
    secs = time.monotonic() - t0
    if r.returncode:
        raise RuntimeError(f"rsync {args}: exit {r.returncode}: {r.stderr.strip()}")
    return secs


def same_bytes(a, b):
    return subprocess.run(["cmp", "-s", a, b]).returncode == 0


def loadavg():
    """The 1, 5 and 15-minute load averages (a call's figures are read beside them)."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def summarize(rows, about):
    out = {"about": about, "tools": {}}
    for tool, runs in rows.items():
        out["tools"][tool] = {"median_seconds": statistics.median(x["seconds"] for x in runs),
                              "seconds": [round(x["seconds"], 3) for x in runs],
                              "allocated": [x.get("allocated") for x in runs],
                              "equal": all(x.get("equal", True) for x in runs),
                              "bytes_sent": [x.get("bytes_sent") for x in runs],
                              "fallbacks": [x["fallbacks"] for x in runs if x.get("fallbacks") is not None]}
    return out
