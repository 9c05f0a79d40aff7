"""Issue 16: idle and connect deadlines that scale with the measured round trip. Through
bench/wan's delay line at 100 ms RTT, a transfer asked for 2 s idle and 1 s connect timeouts
gets 64 x (its control connection's round trip + 200 ms, Linux's least RTO) instead, on both
sides, said in -v and --json;
over loopback the same floors are kept. No timing is asserted: the delay line adds at least its
delay, so a loaded machine only measures a longer round trip, and every check is stated
against the RTT each side reports."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "wan"))
import wan  # noqa: E402

SLUICE = os.environ.get("SLUICE_BIN", str(ROOT / "build" / "tools" / "sluice"))
PREFIX = f"sldl{os.getpid() % 100000}"
RTOS = 64                 # core/io/rtt_deadlines.hpp kDeadlineRtos
RTO_FLOOR_US = 200_000    # kRtoFloorUs
RTO_MIN_RTT_US = 2000     # kRtoScaleMinRttUs: below it, 64 round trips
CEILING_MS = 600_000      # kDeadlineCeilingMs
DEADLINE_S = 240

needs_wan = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ethtool") or not shutil.which("tc"),
                               reason="the emulator needs root, ethtool and tc")


def last_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON stats in:\n{text}")


def scaled(floor_ms, rtt_us):
    rto_us = rtt_us + RTO_FLOOR_US if rtt_us >= RTO_MIN_RTT_US else rtt_us
    return max(floor_ms, min(rto_us * RTOS // 1000, max(floor_ms, CEILING_MS)))


def transfer(tmp_path, recv_cmd, send_cmd, popen, run):
    """Runs one small transfer; returns (sender stats, sender stderr, receiver stats, receiver stderr)."""
    recv = popen(recv_cmd)
    try:
        url = recv.stdout.readline().strip()
        assert url.startswith("sluice://"), recv.stderr.read()
        send = run(send_cmd + [url])
        try:
            rout, rerr = recv.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            recv.kill()
            rout, rerr = recv.communicate()
            raise AssertionError(f"sluice recv did not finish within {DEADLINE_S} s:\n{rerr}")
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.communicate()
    assert send.returncode == 0, send.stderr
    assert recv.returncode == 0, rerr
    return last_json(send.stdout), send.stderr, last_json(rout), rerr


@needs_wan
def test_deadlines_grow_with_a_long_round_trip_on_both_sides(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(2 << 20))
    dest = tmp_path / "dest"
    dest.mkdir()
    with wan.Wan(prefix=PREFIX, delay_ab=50, delay_ba=50, rate_mbit=100, log=lambda m: None) as w:
        s, serr, r, rerr = transfer(
            tmp_path,
            [SLUICE, "recv", "--bind", wan.ADDR_B, "--port", 7117, "--token", "deadlines", "--no-encrypt", "--json",
             "-v", "--idle-timeout", 2, dest],
            [SLUICE, "send", "--streams", 2, "--no-encrypt", "--json", "-v", "--idle-timeout", 2,
             "--connect-timeout", 1, src],
            lambda cmd: w.popen("b", cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
            lambda cmd: w.ex("a", cmd, check=False, timeout=DEADLINE_S))
    assert (dest / "src.bin").read_bytes() == src.read_bytes()
    for stats, err, side in ((s, serr, "send"), (r, rerr, "recv")):
        rtt = stats["control_rtt_us"]
        assert rtt >= 90_000, (side, rtt)  # the line delays 50 ms each way: at least that, measured
        assert stats["idle_timeout_ms"] == scaled(2000, rtt), (side, stats["idle_timeout_ms"], rtt)
        assert stats["idle_timeout_ms"] >= RTOS * (90 + 200) > 2000
        assert "RTOs of RTT + 200 ms; asked 2 s)" in err, err  # -v: the idle timeout chosen, and why
        assert "deadlines: control connection RTT" in err, err
    assert s["connect_timeout_ms"] == scaled(1000, s["control_rtt_us"])
    assert "data stream connect" in serr and "RTOs of RTT + 200 ms; asked 1 s" in serr, serr


def test_deadlines_keep_their_floor_over_loopback(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(1 << 20))
    dest = tmp_path / "dest"
    dest.mkdir()
    s, serr, r, rerr = transfer(
        tmp_path,
        [SLUICE, "recv", "--bind", "127.0.0.1", "--port", "0", "--token", "deadlines", "--json", "-v", str(dest)],
        [SLUICE, "send", "--json", "-v", str(src)],
        lambda cmd: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        lambda cmd: subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S))
    # Loopback (under 2 ms): 64 round trips, far below the defaults (60 s idle, 10 s connect).
    for stats in (s, r):
        assert stats["control_rtt_us"] > 0
        assert stats["idle_timeout_ms"] == 60_000
    # The connect floor holds on loopback, even a loaded one: stated against the RTT the sender
    # measured.
    assert s["connect_timeout_ms"] == scaled(10_000, s["control_rtt_us"])
    assert "idle timeout 60 s (asked;" in serr and "data stream connect" in serr, serr
    assert "idle timeout 60 s (asked;" in rerr, rerr


@needs_wan
def test_a_get_scales_its_deadlines_with_the_link(tmp_path):
    """sluice get through the delay line: the client's Receiver, given the connections it
    opened (GET_ATTACH), chooses 64 RTOs of them over a 2 s idle floor, as recv does."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "f.bin").write_bytes(os.urandom(1 << 20))
    dest = tmp_path / "in"
    dest.mkdir()
    with wan.Wan(prefix=PREFIX, delay_ab=50, delay_ba=50, rate_mbit=100, log=lambda m: None) as w:
        srv = w.popen("b", [SLUICE, "serve", root, "--bind", wan.ADDR_B, "--port", 7119, "--token", "deadlines"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            lines = [srv.stdout.readline().strip() for _ in range(2)]
            assert lines[1].startswith("sluice://"), (lines, srv.stderr.read() if srv.poll() is not None else "")
            g = w.ex("a", [SLUICE, "get", f"sluice://{wan.ADDR_B}:7119/f.bin?token=deadlines", dest, "--json", "-v",
                           "--idle-timeout", 2, "--streams", 2], check=False, timeout=DEADLINE_S)
        finally:
            srv.terminate()
            srv.communicate(timeout=60)
    assert g.returncode == 0, g.stderr
    assert (dest / "f.bin").read_bytes() == (root / "f.bin").read_bytes()
    st = last_json(g.stdout)
    assert st["control_rtt_us"] >= 90_000, st["control_rtt_us"]
    assert st["idle_timeout_ms"] == scaled(2000, st["control_rtt_us"]) > 2000
    assert "RTOs of RTT + 200 ms; asked 2 s)" in g.stderr, g.stderr
