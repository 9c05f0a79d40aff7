"""Two paths between two network namespaces, for --mptcp (issue 16).

A (the sender, MPTCP client) and B (the receiver) are joined by two veth pairs, each its own
subnet: path 1 10.81.1.0/24 (A .1, B .2) and path 2 10.81.2.0/24. No router and no delay line:
what is tested is losing a path, not a long one. Each path can be capped with a tbf on A's
egress (the data direction), so that a transfer is slow enough to still be running when a
path is cut, and so that two paths can be compared with one.

MPTCP: the sender connects to B's path-1 address; B announces its path-2 address
(`ip mptcp endpoint add 10.81.2.2 dev B2 signal`) and A, which accepts one announced
address (`ip mptcp limits set subflows 2 add_addr_accepted 2`), opens a second subflow of
every connection over path 2 (the kernel's in-kernel path manager; no routing rules needed,
as path 2's subnet is directly connected on both sides). `single_path()` withdraws the
announcement, so later connections stay on path 1 alone.
"""
import re
import subprocess
import time

PATHS = (1, 2)


def sh(args, check=True, **kw):
    """Runs a command; on failure raises with its stderr (every set-up step is checked)."""
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def mptcp_enabled():
    """net.mptcp.enabled is 1 in this namespace (sockets of IPPROTO_MPTCP are given)."""
    try:
        with open("/proc/sys/net/mptcp/enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


def mptcp_unavailable():
    """Why this host cannot run the bed (None when it can): root, ip mptcp, net.mptcp."""
    import os
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    try:
        with open("/proc/sys/net/mptcp/enabled") as f:
            f.read()
    except OSError:
        return "this kernel has no MPTCP (/proc/sys/net/mptcp/enabled is missing)"
    r = sh(["ip", "mptcp", "limits", "show"], check=False)
    if r.returncode != 0:
        return f"iproute2 has no 'ip mptcp' ({r.stderr.strip()})"
    return None


class TwoPaths:
    def __init__(self, prefix="slmp", rate_mbit=None, log=lambda m: None):
        if len(prefix) > 8 or not re.fullmatch(r"[a-z0-9]+", prefix):
            raise ValueError(f"prefix '{prefix}': 1-8 lower-case letters or digits (interface names are 15 at most)")
        self.p = prefix
        self.rate_mbit = rate_mbit
        self.log = log

    def ns(self, side):
        return f"{self.p}-{side}"

    def dev(self, side, path):
        return f"{self.p}-{side}{path}"

    @staticmethod
    def addr(side, path):
        return f"10.81.{path}.{1 if side == 'a' else 2}"

    def ex(self, side, args, **kw):
        return sh(["ip", "netns", "exec", self.ns(side)] + list(args), **kw)

    def popen(self, side, args, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.ns(side)] + [str(a) for a in args], **kw)

    def down(self):
        for side in "ab":
            sh(["ip", "netns", "del", self.ns(side)], check=False)

    def up(self):
        self.down()  # a set left by a run that was killed -9
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

    def _build(self):
        for side in "ab":
            sh(["ip", "netns", "add", self.ns(side)])
            for key in ("all", "default"):
                self.ex(side, ["sysctl", "-q", f"net.ipv6.conf.{key}.disable_ipv6=1"])
            self.ex(side, ["sysctl", "-q", "net.mptcp.enabled=1"])
            # Large enough socket buffers that one connection fills both capped paths.
            for key in ("tcp_rmem", "tcp_wmem"):
                self.ex(side, ["sysctl", "-q", f"net.ipv4.{key}=4096 131072 16777216"])
            self.ex(side, ["ip", "link", "set", "lo", "up"])
            self.ex(side, ["ip", "mptcp", "limits", "set", "subflows", 2, "add_addr_accepted", 2])
        for path in PATHS:
            sh(["ip", "link", "add", self.dev("a", path), "netns", self.ns("a"), "type", "veth", "peer", "name",
                self.dev("b", path), "netns", self.ns("b")])
            for side in "ab":
                self.ex(side, ["ip", "addr", "add", f"{self.addr(side, path)}/24", "dev", self.dev(side, path)])
                self.ex(side, ["ip", "link", "set", self.dev(side, path), "up"])
            if self.rate_mbit:
                self.cap(path, self.rate_mbit)
        self.two_paths()

    def cap(self, path, rate_mbit):
        """A tbf of rate_mbit on A's side of `path` (the data direction)."""
        burst = max(64 * 1024, int(rate_mbit * 1e6 / 8 / 250))  # at least one tick (HZ 250) of the rate
        self.ex("a", ["tc", "qdisc", "replace", "dev", self.dev("a", path), "root", "tbf", "rate", f"{rate_mbit}mbit",
                      "burst", burst, "limit", 4 * burst])

    def two_paths(self):
        """B announces its path-2 address: every new MPTCP connection gets a subflow over path 2."""
        self.ex("b", ["ip", "mptcp", "endpoint", "flush"])
        self.ex("b", ["ip", "mptcp", "endpoint", "add", self.addr("b", 2), "dev", self.dev("b", 2), "signal"])

    def single_path(self):
        """No announcement: new MPTCP connections stay on path 1."""
        self.ex("b", ["ip", "mptcp", "endpoint", "flush"])

    def subflows_on(self, path):
        """Established TCP subflows in A with a local address on `path` (ss; MPTCP subflows are
        TCP sockets to ss)."""
        out = self.ex("a", ["ss", "-Htn", "state", "established", "src", self.addr("a", path)]).stdout
        return len([line for line in out.splitlines() if line.strip()])

    def wait_subflows(self, path, count, deadline_s):
        """Waits (bounded) until `count` subflows are established on `path`; False if never."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.subflows_on(path) >= count:
                return True
            time.sleep(0.1)
        return False

    def cut(self, path):
        """Path `path` is gone: both ends' links down (carrier lost, routes withdrawn)."""
        self.ex("a", ["ip", "link", "set", self.dev("a", path), "down"])
        self.ex("b", ["ip", "link", "set", self.dev("b", path), "down"])
