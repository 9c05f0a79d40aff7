"""Issue 16: --mptcp. Two paths between two namespaces (bench/wan/mptcp_bed.py), one cut while
the transfer is certainly running: a pipe transfer whose second half the test writes only
after the cut (the transfer cannot have ended before it), over paths capped by tbf. Pipe mode
fails on any broken data stream (no stream reconnect there), so an identical copy means every
connection survived on the other path. And no silent fallback: a peer in plain TCP, and a
namespace with net.mptcp.enabled=0, are each reported per connection with the reason.
No timing: every wait is bounded by a generous deadline and asserts only what happened."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "wan"))
import mptcp_bed  # noqa: E402

SLUICE = os.environ.get("SLUICE_BIN", str(ROOT / "build" / "tools" / "sluice"))
PREFIX = f"slmp{os.getpid() % 10000}"  # never another run's namespaces
PORT = 7161
TOKEN = "mptcptest"
DEADLINE_S = 300
HALF = 12 << 20

needs_bed = pytest.mark.skipif(mptcp_bed.mptcp_unavailable() is not None,
                               reason=f"two-path MPTCP bed: {mptcp_bed.mptcp_unavailable()}")


def last_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON stats in:\n{text}")


def finish(proc, what, data=None):
    try:
        out, err = proc.communicate(data, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{what} did not finish within {DEADLINE_S} s:\n{err}")
    return proc.returncode, out, err


def pipe_over_two_paths(tmp_path, before_second_half, after_send=lambda bed: None):
    """A pipe transfer over two 40 Mbit/s paths (2 streams) whose second half is written only
    once every connection has a subflow over path 2 and before_second_half(bed) has run; checks
    both sides succeeded with an identical copy. Returns (sender stats, sender stderr, receiver
    stderr, what before_second_half and after_send(bed), run once the sender is done, returned)."""
    first, second = os.urandom(HALF), os.urandom(HALF)
    out_path = tmp_path / "out.bin"
    # 40 Mbit/s per path: the first half takes seconds, so both subflows of every connection
    # are up long before the test writes the second half.
    with mptcp_bed.TwoPaths(prefix=PREFIX, rate_mbit=40) as bed, open(out_path, "wb") as out:
        recv = bed.popen("b", [SLUICE, "recv", "--stdout", PORT, "--mptcp", "--token", TOKEN, "--no-encrypt",
                               "--json", "-v"], stdout=out, stderr=subprocess.PIPE, text=True)
        send = None
        try:
            lines = [recv.stderr.readline() for _ in range(2)]  # -v's token line, then the URL
            assert lines[-1].startswith("sluice://"), f"receiver did not start: {lines}"
            send = bed.popen("a", [SLUICE, "send", "-", "--mptcp", "--streams", 2, "--no-encrypt", "--json", "-v",
                                   "--to", f"{bed.addr('b', 1)}:{PORT}", "--token", TOKEN],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            send.stdin.write(first)
            send.stdin.flush()
            # Control connection and both data streams each have a subflow over path 2.
            assert bed.wait_subflows(2, 3, DEADLINE_S), "no second subflow over path 2: " + \
                bed.ex("a", ["ss", "-Htn"]).stdout
            before = before_second_half(bed)
            rc, sout, serr = finish(send, "sluice send", second)  # then the end of the pipe
            after = after_send(bed)
            rrc, _, rerr = finish(recv, "sluice recv")
        finally:
            for p in (send, recv):
                if p and p.poll() is None:
                    p.kill()
                    p.wait()
    serr = serr.decode(errors="replace")
    assert rc == 0, serr
    assert rrc == 0, rerr
    assert out_path.read_bytes() == first + second  # an identical copy
    return json.loads(sout.decode().strip().splitlines()[-1]), serr, rerr, before, after


@needs_bed
def test_pipe_transfer_survives_losing_one_of_two_paths(tmp_path):
    s, serr, rerr, _, _ = pipe_over_two_paths(tmp_path, lambda bed: bed.cut(1))  # the path every connection was opened on
    assert s["mptcp"] == "on", s["mptcp_connections"]
    assert [c["stream"] for c in s["mptcp_connections"]] == [0, 1, 2]
    assert all(c["mptcp"] for c in s["mptcp_connections"]), s["mptcp_connections"]
    assert "mptcp: 3 of 3 connections run MPTCP" in serr
    r = last_json(rerr)
    assert r["mptcp"] == "on" and len(r["mptcp_connections"]) == 3, r["mptcp_connections"]


def tx_bytes(bed, side, path):
    return int(bed.ex(side, ["cat", f"/sys/class/net/{bed.dev(side, path)}/statistics/tx_bytes"]).stdout)


@needs_bed
def test_stream_figures_count_what_every_subflow_carried(tmp_path):
    """TCP_INFO on an MPTCP socket is its first subflow's: with path 2 carrying part of the
    data, a stream's bytes_sent from it would fall short of what the stream sent. The figures
    sum every subflow (MPTCP_TCPINFO), so together they cover all the data, and window limits
    are not judged on MPTCP streams (said, on both sides)."""
    s, _, rerr, path2_before, path2_after = pipe_over_two_paths(
        tmp_path, lambda bed: tx_bytes(bed, "a", 2), lambda bed: tx_bytes(bed, "a", 2))  # both paths up to the end
    # Path 2 carried a real part of the second half (the two 40 Mbit/s paths both fill).
    assert path2_after - path2_before > 1 << 20, (path2_before, path2_after)
    assert [t["subflows"] for t in s["tcp_streams"]] == [2, 2], s["tcp_streams"]
    assert sum(t["bytes_sent"] for t in s["tcp_streams"]) >= 2 * HALF, s["tcp_streams"]
    assert "data streams 1, 2 run MPTCP: window limits not judged" in s["window_limits_unjudged"], s
    r = last_json(rerr)
    assert "run MPTCP: window limits not judged" in r["window_limits_unjudged"], r


def run_pair(tmp_path, send_prefix, recv_prefix, send_flags, recv_flags, host, env=None):
    """A small file transfer; returns (sender stats, receiver stats, sender stderr)."""
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(3 << 20))
    dest = tmp_path / "dest"
    dest.mkdir()
    recv = subprocess.Popen(recv_prefix + [SLUICE, "recv", str(dest), "--bind", host, "--host", host, "--port", "0", "--token", TOKEN,
                                           "--no-encrypt", "--json", "-v", *recv_flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = recv.stdout.readline().strip()
        assert url.startswith("sluice://"), recv.stderr.read()
        send = subprocess.run(send_prefix + [SLUICE, "send", str(src), url, "--no-encrypt", "--json", "-v", *send_flags],
                              capture_output=True, text=True, timeout=DEADLINE_S, env=env)
        rrc, rout, rerr = finish(recv, "sluice recv")
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    assert send.returncode == 0, send.stderr
    assert rrc == 0, rerr
    assert (dest / "f.bin").read_bytes() == src.read_bytes()
    return json.loads(send.stdout.strip().splitlines()[-1]), last_json(rout), send.stderr


mptcp_here = mptcp_bed.mptcp_enabled


def test_a_receiver_in_plain_tcp_is_reported_per_connection(tmp_path):
    s, r, err = run_pair(tmp_path, [], [], ["--mptcp", "--streams", "2"], [], "127.0.0.1")
    assert s["mptcp"] == "fallback"
    assert [c["stream"] for c in s["mptcp_connections"]] == [0, 1, 2]
    for c in s["mptcp_connections"]:
        assert not c["mptcp"]
        # Where this kernel has MPTCP on, the peer is what lacks it; else the kernel says why.
        assert ("answered in plain TCP" if mptcp_here() else "MPTCP") in c["why"], c
    assert "mptcp: data stream 1: plain TCP" in err
    assert r["mptcp"] == "off" and r["mptcp_connections"] == []  # the receiver was not asked


@pytest.mark.skipif(not mptcp_here(), reason="net.mptcp.enabled is not 1 here")
def test_a_sender_in_plain_tcp_is_reported_by_an_mptcp_receiver(tmp_path):
    s, r, _ = run_pair(tmp_path, [], [], ["--streams", "2"], ["--mptcp"], "127.0.0.1")
    assert s["mptcp"] == "off"
    assert r["mptcp"] == "fallback"
    assert len(r["mptcp_connections"]) == 3
    assert all("connected in plain TCP" in c["why"] for c in r["mptcp_connections"]), r["mptcp_connections"]


@pytest.mark.skipif(not mptcp_here(), reason="net.mptcp.enabled is not 1 here")
def test_zero_copy_sends_fall_back_to_splice_and_say_so(tmp_path):
    # MPTCP sockets refuse SEND_ZC (EOPNOTSUPP): asked for zc, the sender takes splice, said.
    s, r, err = run_pair(tmp_path, [], [], ["--mptcp", "--send-path", "zc"], ["--mptcp"], "127.0.0.1")
    assert s["mptcp"] == "on" and r["mptcp"] == "on"
    assert s["send_path"] == "splice"
    assert any("SEND_ZC" in f for f in s["fallbacks"]), s["fallbacks"]


@needs_bed
def test_mptcp_disabled_in_the_senders_namespace_is_reported(tmp_path):
    with mptcp_bed.TwoPaths(prefix=PREFIX) as bed:
        bed.ex("a", ["sysctl", "-q", "net.mptcp.enabled=0"])
        s, r, err = run_pair(tmp_path, ["ip", "netns", "exec", bed.ns("a")], ["ip", "netns", "exec", bed.ns("b")],
                             ["--mptcp", "--streams", "2"], ["--mptcp"], bed.addr("b", 1))
    assert s["mptcp"] == "fallback"
    assert all(not c["mptcp"] and "net.mptcp.enabled=0" in c["why"] for c in s["mptcp_connections"]), s
    assert "net.mptcp.enabled=0" in err
    # The receiver could make its MPTCP listener; it reports the plain connections it got.
    assert r["mptcp"] == "fallback"
    assert all("connected in plain TCP" in c["why"] for c in r["mptcp_connections"]), r["mptcp_connections"]
