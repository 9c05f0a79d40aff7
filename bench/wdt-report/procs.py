"""Peer and process helpers of the WDT-report bench (bench.py): the test bed's namespaces, how
to start each tool (Peer), bounded waits on its processes, leftovers killed, background CPU."""
import os
import select
import subprocess
import sys
import time

import measure

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
NETNS = os.path.join(BENCH, "testbed", "netns.sh")
PEERS = os.path.join(BENCH, "peers")
QUIET = 0.05  # background CPU share below which the machine counts as quiet


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def netns(*args):
    subprocess.run([NETNS, *args], check=True, timeout=60)


def netns_env():
    out = subprocess.run([NETNS, "env"], capture_output=True, text=True, check=True).stdout
    return dict(kv.split("=", 1) for kv in out.split())


class Peer:
    """How to run one tool: a script in bench/peers/ or a --peer command pair."""

    def __init__(self, name, script=None, send=None, recv=None, exits=True):
        self.name, self.script, self.send_t, self.recv_t = name, script, send, recv
        if script:
            kind = subprocess.run([script, "kind"], capture_output=True, text=True, check=True).stdout
            k = dict(kv.split("=") for kv in kind.split())
            self.exits, self.url, self.tree = k["exits"] == "1", k["url"] == "1", k["tree"] == "1"
            self.local = k.get("local") == "1"  # no receiver, no network: a reference
        else:
            self.exits, self.url, self.tree, self.local = exits, "{url}" in send, True, False

    def _fill(self, t, v):
        for k, val in v.items():
            t = t.replace("{" + k + "}", str(val))
        return t

    def recv_argv(self, v):
        if self.script:
            return [self.script, "recv", v["dst"], v["host"], str(v["port"])]
        return ["bash", "-c", self._fill(self.recv_t, v)]

    def send_argv(self, v):
        if self.script:
            argv = [self.script, "send", v["src"], v["host"], str(v["port"])]
            return argv + ([v["url"]] if self.url else [])
        return ["bash", "-c", self._fill(self.send_t, v)]


def parse_peer(spec, exits):
    name, sep, cmds = spec.partition("=")
    send, sep2, recv = cmds.partition("|||")
    if not sep or not sep2 or not name or not send.strip() or not recv.strip():
        raise SystemExit(f"bench: --peer wants NAME=SEND_CMD|||RECV_CMD, got {spec!r}")
    return Peer(name, send=send.strip(), recv=recv.strip(), exits=exits)


def wait_all(procs, deadline):
    """Waits until every proc has exited or the deadline passed; True when all exited."""
    while True:
        live = [p for p in procs if not p.done()]
        if not live:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        select.select([p.pidfd for p in live], [], [], left)


def wait_first_failure_or_sender(send, recv, deadline):
    """Waits for the sender; returns early if the receiver fails first."""
    while not send.done():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if recv.done() and recv.rc != 0:
            return True
        select.select([send.pidfd] + ([] if recv.done() else [recv.pidfd]), [], [], left)
    return True


def kill_leftovers(ns_names):
    for ns in ns_names:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass


def background_busy(seconds=2.0):
    b0, t0 = measure.machine_busy_s(), time.monotonic()
    time.sleep(seconds)
    return round((measure.machine_busy_s() - b0) / (time.monotonic() - t0) / os.cpu_count(), 3)
