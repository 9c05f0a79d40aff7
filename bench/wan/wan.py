#!/usr/bin/env python3
"""A long, lossy link between two network namespaces (bench/wan/README.md).

    A (sender end) --veth-- R (router: the delay line, tbf toward B) --veth-- B (receiver end)

All three on one /24, so R forwards at layer 2 with the delay line (delayline.c). Every name
starts with a prefix (default "slwan") so it never meets the test suite's namespaces; the
namespaces are removed on exit, on error and on SIGTERM/SIGINT, and a leftover set with the
same prefix is removed before a new one is made.

    wan.py validate [options]      set up, validate (RTT, loss, Mathis), tear down
    wan.py up [options]            set up and validate, then wait until Ctrl-C / SIGTERM
    wan.py down [--prefix P]       remove a leftover set
"""
import argparse
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ADDR_A, ADDR_B = "10.77.0.1", "10.77.0.2"
MSS = 1448  # 1500-byte MTU, IPv4, TCP timestamps
HERE = Path(__file__).resolve().parent


class ValidationError(RuntimeError):
    pass


def sh(args, check=True, **kw):
    """Runs a command; on failure raises with its stderr (every set-up step is checked)."""
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def find_delayline():
    for cand in (os.environ.get("SLUICE_DELAYLINE"), HERE.parents[1] / "build/bench/wan/delayline"):
        if cand and Path(cand).is_file():
            return str(cand)
    raise RuntimeError("delayline not built: run ninja -C build (or set SLUICE_DELAYLINE)")


def mathis_bps(rtt_ms, loss):
    """Mathis et al.: one Reno-like stream's rate, MSS/RTT * sqrt(3/2) / sqrt(p)."""
    return MSS * 8 / (rtt_ms / 1000) * math.sqrt(1.5) / math.sqrt(loss)


class Wan:
    def __init__(self, prefix="slwan", delay_ab=10.0, delay_ba=10.0, jitter=0.0, loss_ab=0.0, loss_ba=0.0,
                 ge_ab=None, rate_mbit=1000.0, buffer_bytes=None, sockbuf=None, delayline=None, log=print,
                 bottleneck="line", own_sessions=False):
        if len(prefix) > 12 or not re.fullmatch(r"[a-z0-9]+", prefix):
            raise ValueError(f"prefix '{prefix}': 1-12 lower-case letters or digits (interface names are 15 at most)")
        self.p = prefix
        self.delay_ab, self.delay_ba, self.jitter = delay_ab, delay_ba, jitter
        self.loss_ab, self.loss_ba, self.ge_ab = loss_ab, loss_ba, ge_ab
        self.rate_mbit = rate_mbit
        # Where the rate limit is: the delay line's own token bucket, or a tbf on R's veth
        # toward B of the same rate, burst and buffer (README.md: the tbf's watchdog timer
        # fired once per frame and bounded the emulator near 650-750 Mbit/s at 80 ms).
        if bottleneck not in ("tbf", "line"):
            raise ValueError(f"bottleneck '{bottleneck}': tbf or line")
        self.bottleneck = bottleneck
        rtt_s = (delay_ab + delay_ba + jitter) / 1000
        self.bdp = int(rate_mbit * 1e6 / 8 * rtt_s) if rate_mbit else int(1e9 / 8 * rtt_s)
        # tbf queue: one bandwidth-delay product (wan.md), at least 64 KB
        self.buffer = buffer_bytes or max(64 * 1024, self.bdp)
        # Socket buffer caps at the ends: the kernel keeps about half a buffer for payload and a
        # window of twice the BDP lets loss recovery keep the pipe full: four BDPs, >= 4 MiB.
        self.sockbuf = sockbuf or max(4 << 20, 4 * self.bdp)
        self.delayline = delayline or find_delayline()
        self.log = log
        self.line = None
        self.stats_path = f"/tmp/{prefix}-delayline.json"
        # Every command in an end (A, B) started in a session of its own (setsid), as
        # bench/serve/get.py does (h15k): with autogroups on (this machine's default), ends
        # started from the bench's one session shared its autogroup, each end's CPU weighted by
        # its thread count against the other's and against other load. setsid execs in place
        # (a child of Popen leads no group), so the pid stays the mover's (/proc CPU times).
        self.own_sessions = own_sessions

    # names
    def ns(self, side):
        return f"{self.p}-{side}"

    @property
    def burst(self):
        """The bottleneck's token bucket in bytes: about 1 ms of the rate, at least 32 KiB."""
        return max(32 * 1024, int(self.rate_mbit * 1e6 / 8 / 1000))

    @property
    def rtt_ms(self):
        return self.delay_ab + self.delay_ba + self.jitter  # jitter is uniform 0..J each way: J/2 + J/2

    def _in(self, side, args):
        session = ["setsid"] if self.own_sessions and side in ("a", "b") else []
        return ["ip", "netns", "exec", self.ns(side), *session] + [str(a) for a in args]

    def ex(self, side, args, **kw):
        return sh(self._in(side, args), **kw)

    def popen(self, side, args, **kw):
        return subprocess.Popen(self._in(side, args), **kw)

    # set-up and tear-down
    def down(self):
        self.stop_line()
        for side in "arb":
            sh(["ip", "netns", "del", self.ns(side)], check=False)
        Path(self.stats_path).unlink(missing_ok=True)

    def up(self):
        self.down()  # a set left by a run that was killed -9
        try:
            self._build()
            self.start_line()
        except BaseException:
            self.down()
            raise
        return self

    def _build(self):
        p = self.p
        for side in "arb":
            sh(["ip", "netns", "add", self.ns(side)])
            # IPv6 off: no router solicitations or DAD through the line, only the traffic measured
            for key in ("all", "default"):
                self.ex(side, ["sysctl", "-q", f"net.ipv6.conf.{key}.disable_ipv6=1"])
            self.ex(side, ["ip", "link", "set", "lo", "up"])
        sh(["ip", "link", "add", f"{p}-ar", "netns", self.ns("a"), "type", "veth", "peer", "name", f"{p}-ra",
            "netns", self.ns("r")])
        sh(["ip", "link", "add", f"{p}-br", "netns", self.ns("b"), "type", "veth", "peer", "name", f"{p}-rb",
            "netns", self.ns("r")])
        for side, dev in (("a", "ar"), ("r", "ra"), ("r", "rb"), ("b", "br")):
            # Offloads off: one skb is one wire packet (so 1% loss is 1% of packets) and
            # checksums are complete; re-injected partial checksums stall TCP (wan.md).
            self.ex(side, ["ethtool", "-K", f"{p}-{dev}", "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                           "rx", "off"])
            self.ex(side, ["ip", "link", "set", f"{p}-{dev}", "up"])
        self.ex("a", ["ip", "addr", "add", f"{ADDR_A}/24", "dev", f"{p}-ar"])
        self.ex("b", ["ip", "addr", "add", f"{ADDR_B}/24", "dev", f"{p}-br"])
        if self.rate_mbit and self.bottleneck == "tbf":
            self.ex("r", ["tc", "qdisc", "replace", "dev", f"{p}-rb", "root", "tbf", "rate", f"{self.rate_mbit}mbit",
                          "burst", self.burst, "limit", self.buffer])
        for side in "ab":
            for key in ("tcp_rmem", "tcp_wmem"):
                self.ex(side, ["sysctl", "-q", f"net.ipv4.{key}=4096 131072 {self.sockbuf}"])
            # Every run starts from nothing: no ssthresh remembered from the run before.
            self.ex(side, ["sysctl", "-q", "net.ipv4.tcp_no_metrics_save=1"])

    def start_line(self):
        self.stop_line()
        args = [self.delayline, "--a", f"{self.p}-ra", "--b", f"{self.p}-rb", "--delay-ab", self.delay_ab,
                "--delay-ba", self.delay_ba, "--jitter", self.jitter, "--loss-ab", self.loss_ab * 100,
                "--loss-ba", self.loss_ba * 100, "--stats", self.stats_path]
        if self.ge_ab:
            args += ["--ge-ab", ",".join(str(x) for x in self.ge_ab)]
        if self.rate_mbit and self.bottleneck == "line":
            args += ["--rate-ab", self.rate_mbit, "--limit-ab", self.buffer, "--burst-ab", self.burst]
        args += os.environ.get("SLUICE_DELAYLINE_ARGS", "").split()  # e.g. --rcvbuf 268435456
        Path(self.stats_path).unlink(missing_ok=True)
        self.line = self.popen("r", args, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 5
        while not Path(self.stats_path).exists():
            if self.line.poll() is not None:
                raise RuntimeError(f"delayline exited at start: {self.line.stderr.read().strip()}")
            if time.monotonic() > deadline:
                raise RuntimeError("delayline did not start within 5 s")
            time.sleep(0.02)

    def stop_line(self):
        if self.line and self.line.poll() is None:
            self.line.terminate()
            try:
                self.line.wait(5)
            except subprocess.TimeoutExpired:
                self.line.kill()
                self.line.wait()
        self.line = None

    def set_loss(self, loss_ab, ge_ab=None):
        """Restarts the delay line with another loss on the data direction (counters restart)."""
        self.loss_ab, self.ge_ab = loss_ab, ge_ab
        self.start_line()

    @property
    def expected_loss(self):
        ge = 0.0
        if self.ge_ab:
            p, r, lb = self.ge_ab
            ge = p / (p + r) * lb
        return 1 - (1 - self.loss_ab) * (1 - ge)

    def counters(self):
        """The delay line's frame counters now (SIGUSR1 makes it write them)."""
        before = Path(self.stats_path).stat().st_mtime_ns
        self.line.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 2
        while Path(self.stats_path).stat().st_mtime_ns == before and time.monotonic() < deadline:
            time.sleep(0.01)
        return json.loads(Path(self.stats_path).read_text())

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

    # validation (issue 16: RTT within 1 ms, loss within 10%, CUBIC within 30% of Mathis at 1%)
    def ping_rtt_ms(self, count=20):
        """Median ping RTT A->B->A: on a loaded machine a reply now and then waits for ksoftirqd
        (measured: one of 20 at 2x), which the median ignores and the mean does not."""
        self.ex("a", ["ping", "-c", 2, "-i", 0.2, "-W", 2, ADDR_B], check=False)  # ARP resolved first
        r = self.ex("a", ["ping", "-c", count, "-i", 0.05, "-W", 2, ADDR_B], check=False)
        times = sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", r.stdout))
        if not times:
            raise ValidationError(f"ping from A to B got no answer: {r.stdout.strip()} {r.stderr.strip()}")
        return times[len(times) // 2]

    def iperf3(self, args, seconds, port=5299):
        """iperf3 from A to a one-off server in B; returns its JSON (bounded in time)."""
        srv = self.popen("b", ["iperf3", "-s", "-1", "-p", port, "-B", ADDR_B], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        try:
            for _ in range(50):  # the server listens within a moment
                r = self.ex("b", ["ss", "-Hltn", f"sport = :{port}"], check=False)
                if r.stdout.strip():
                    break
                time.sleep(0.05)
            r = self.ex("a", ["iperf3", "-c", ADDR_B, "-p", port, "-J"] + list(args), check=False,
                        timeout=seconds + 30)
            out = json.loads(r.stdout) if r.stdout.strip() else {}
            if "error" in out or r.returncode != 0:
                raise RuntimeError(f"iperf3 {' '.join(map(str, args))}: {out.get('error', r.stderr.strip())}")
            return out
        finally:
            srv.kill()
            srv.wait()

    def validate(self, mathis_seconds=10):
        rtt = self.ping_rtt_ms()
        self.log(f"wan: ping RTT {rtt:.2f} ms, median of 20 (set {self.rtt_ms:.2f} ms)")
        if abs(rtt - self.rtt_ms) > 1.0:
            raise ValidationError(f"ping RTT {rtt:.2f} ms is not within 1 ms of the setting {self.rtt_ms:.2f} ms")
        self.check_loss()
        self.check_mathis(mathis_seconds)

    def check_loss(self):
        want = self.expected_loss
        if want > 0:
            # enough frames that 10% of the rate is three standard deviations (x10 for bursts)
            burst = 1 / self.ge_ab[1] if self.ge_ab else 1
            frames = min(2_000_000, int(9 * (1 - want) / (want * 0.01) * burst))
        else:
            frames = 20_000
        rate = 400e6  # UDP through the line (below the 1 Gbit/s ceiling)
        secs = max(1, min(20, math.ceil(frames * 1428 * 8 / rate)))
        c0 = self.counters()["ab"]
        self.iperf3(["-u", "-b", "400M", "-l", "1400", "-t", secs], secs)
        c1 = self.counters()["ab"]
        rx, lost = c1["rx"] - c0["rx"], c1["lost"] - c0["lost"]
        got = lost / rx if rx else 0
        self.log(f"wan: loss {got * 100:.3f}% of {rx} frames A->B (set {want * 100:.3f}%)")
        if rx < frames / 2:
            raise ValidationError(f"only {rx} frames reached the delay line in {secs} s (wanted {frames})")
        if abs(got - want) > 0.1 * want:
            raise ValidationError(f"measured loss {got * 100:.3f}% is not within 10% of the setting {want * 100:.3f}%")
        return got

    def check_mathis(self, seconds, runs=3):
        """One CUBIC stream at 1% loss against the Mathis bound: the median of three runs, as
        one run at 80 ms sees only ~20 loss events and measured 0.67x-1.15x of the bound."""
        saved = (self.loss_ab, self.ge_ab)
        self.set_loss(0.01)
        try:
            rates = sorted(self.iperf3(["-C", "cubic", "-t", seconds, "-O", 2], seconds)["end"]["sum_received"]
                           ["bits_per_second"] for _ in range(runs))
        finally:
            self.set_loss(*saved)
        got = rates[len(rates) // 2]
        bound = mathis_bps(self.rtt_ms, 0.01)
        self.log(f"wan: one CUBIC stream at 1% loss {got / 1e6:.2f} Mbit/s (median of "
                 f"{', '.join(f'{r / 1e6:.2f}' for r in rates)}), Mathis bound {bound / 1e6:.2f} Mbit/s "
                 f"({got / bound:.2f}x)")
        if abs(got - bound) > 0.3 * bound:
            raise ValidationError(f"one CUBIC stream at 1% loss moved {got / 1e6:.2f} Mbit/s (median of {runs} runs), "
                                  f"not within 30% of the Mathis bound {bound / 1e6:.2f} Mbit/s")
        return got, bound


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["up", "down", "validate"])
    ap.add_argument("--prefix", default="slwan")
    ap.add_argument("--rtt", type=float, default=20.0, help="ms, split evenly over both directions")
    ap.add_argument("--delay-ab", type=float, help="ms A->B (overrides --rtt)")
    ap.add_argument("--delay-ba", type=float, help="ms B->A (overrides --rtt)")
    ap.add_argument("--jitter", type=float, default=0.0, help="ms, uniform 0..J per direction, no reordering")
    ap.add_argument("--loss", type=float, default=0.0, help="random loss A->B, percent")
    ap.add_argument("--loss-ba", type=float, default=0.0, help="random loss B->A, percent")
    ap.add_argument("--ge", help="Gilbert-Elliott loss A->B: P,R,LOSS_BAD (probabilities 0..1)")
    ap.add_argument("--rate", type=float, default=1000.0, help="tbf bottleneck in Mbit/s toward B (0: none)")
    ap.add_argument("--buffer", type=int, help="tbf queue in bytes (default one bandwidth-delay product)")
    ap.add_argument("--bottleneck", choices=["line", "tbf"], default="line",
                    help="the rate limit: the delay line's own token bucket, or a tbf on R's veth toward B")
    ap.add_argument("--sockbuf", type=int, help="tcp_rmem/tcp_wmem max at the ends (default 4 BDP, >= 4 MiB)")
    return ap.parse_args(argv)


def main(argv):
    a = parse_args(argv)
    half = a.rtt / 2
    ge = tuple(float(x) for x in a.ge.split(",")) if a.ge else None
    wan = Wan(prefix=a.prefix, delay_ab=a.delay_ab if a.delay_ab is not None else half,
              delay_ba=a.delay_ba if a.delay_ba is not None else half, jitter=a.jitter, loss_ab=a.loss / 100,
              loss_ba=a.loss_ba / 100, ge_ab=ge, rate_mbit=a.rate, buffer_bytes=a.buffer, sockbuf=a.sockbuf,
              bottleneck=a.bottleneck)
    if a.action == "down":
        wan.down()
        return 0
    # SIGTERM ends us through the finally below, like Ctrl-C: the namespaces never outlive us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        wan.up()
        wan.validate()
        print(f"wan: valid; namespaces {wan.ns('a')} ({ADDR_A}) -> {wan.ns('r')} -> {wan.ns('b')} ({ADDR_B})")
        if a.action == "up":
            print("wan: up; Ctrl-C to tear down", flush=True)
            while True:
                time.sleep(3600)
        return 0
    except ValidationError as e:
        print(f"wan: validation failed: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130
    finally:
        wan.down()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
