"""bench/wan's emulator builds its three namespaces, carries a transfer through the delay line
(every frame counted there, none lost at zero loss) and removes everything it made, also when
the body fails. No timing is asserted: the delay is 1 ms each way and only counts are checked."""
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
PREFIX = f"slwt{os.getpid() % 100000}"  # never the suite's namespace names, nor another run's

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ethtool") or not shutil.which("tc"),
    reason="the emulator needs root, ethtool and tc")


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX + "-")]


def transfer(w, src, dest, port):
    """sluice send (2 CUBIC streams) from A to a receiver in B, both bounded in time; returns the
    sender's JSON stats."""
    recv = w.popen("b", [SLUICE, "recv", "--bind", wan.ADDR_B, "--port", port, "--token", "wantest", "--json",
                         "--cc", "cubic", dest], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert recv.stdout.readline().startswith("sluice://")
        send = w.ex("a", [SLUICE, "send", "--streams", 2, "--cc", "cubic", "--json", src,
                          f"sluice://{wan.ADDR_B}:{port}/?token=wantest"], check=False, timeout=180)
        assert send.returncode == 0, send.stderr
        _, err = recv.communicate(timeout=60)
        assert recv.returncode == 0, err
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.communicate()
    return json.loads(send.stdout.strip().splitlines()[-1])


def test_transfer_through_the_delay_line_and_teardown(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 << 20))
    dest = tmp_path / "dest"
    dest.mkdir()
    w = wan.Wan(prefix=PREFIX, delay_ab=1, delay_ba=1, rate_mbit=100, bottleneck="tbf", log=lambda m: None)
    with w:
        assert "tbf" in w.ex("r", ["tc", "qdisc", "show", "dev", f"{PREFIX}-rb"]).stdout
        assert sorted(namespaces()) == sorted(w.ns(s) for s in "arb")
        s = transfer(w, src, dest, 7116)
        c = w.counters()
    assert (dest / "src.bin").read_bytes() == src.read_bytes()
    assert s["congestion_control"] == "cubic"
    # Offloads are off: every frame is at most one MTU, so the data alone took this many frames.
    assert c["ab"]["tx"] >= (3 << 20) // 1514
    assert c["ab"]["lost"] == 0 and c["ab"]["overflow"] == 0
    assert c["ba"]["tx"] > 0  # ACKs came back through the line too
    assert conserved(c["ab"]) and conserved(c["ba"]), c
    # Its input rings hold 256 MiB each (h16p; without a ring, --rx-ring 0, the socket buffer of
    # 256 MiB, doubled by the kernel: 32 MiB dropped tens of thousands of frames from zero-copy
    # senders at 20 ms while the line kept up, h16j).
    assert c["ab"]["rx_ring"] >= 256 << 20 and c["ba"]["rx_ring"] >= 256 << 20, c
    assert c["ab"]["sock_drops"] == 0 and c["ba"]["sock_drops"] == 0, c
    assert namespaces() == []


def test_namespaces_are_removed_when_the_body_fails():
    w = wan.Wan(prefix=PREFIX, delay_ab=1, delay_ba=1, rate_mbit=0, log=lambda m: None)
    with pytest.raises(RuntimeError, match="on purpose"):
        with w:
            assert len(namespaces()) == 3
            raise RuntimeError("on purpose")
    assert namespaces() == []
    assert not Path(w.stats_path).exists()


def test_bad_delay_line_option_fails_set_up_and_cleans_up():
    w = wan.Wan(prefix=PREFIX, ge_ab=(0.5, 0, 1), log=lambda m: None)  # R = 0: the line refuses it
    with pytest.raises(RuntimeError, match="delayline exited at start: .*--ge-ab"):
        w.up()
    assert namespaces() == []


def conserved(c):
    """Every frame the line read is accounted for exactly once."""
    return c["rx"] == (c["lost"] + c["overflow"] + c["queue_drops"] + c["enobufs"] + c["send_errors"] + c["tx"] +
                       c["queued"])


def test_line_bottleneck_drops_at_its_queue_and_counts_every_frame(tmp_path):
    """The bottleneck inside the line (wan.py's default, h16p): no tbf on the veth, a queue of
    ~10 frames at 20 Mbit/s behind a bucket of 32 KiB (22 frames) that two CUBIC streams
    overflow (3 MiB in windows that grow past 32 frames each, against 2 ms of path), so it must
    drop there; the copy is still whole and every frame is counted once."""
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 << 20))
    dest = tmp_path / "dest"
    dest.mkdir()
    w = wan.Wan(prefix=PREFIX, delay_ab=1, delay_ba=1, rate_mbit=20, buffer_bytes=16000, log=lambda m: None)
    with w:
        assert "tbf" not in w.ex("r", ["tc", "qdisc", "show", "dev", f"{PREFIX}-rb"]).stdout
        transfer(w, src, dest, 7117)
        c = w.counters()
    assert (dest / "src.bin").read_bytes() == src.read_bytes()
    assert c["ab"]["queue_drops"] > 0 and c["ba"]["queue_drops"] == 0, c
    assert conserved(c["ab"]) and conserved(c["ba"]), c


def test_line_bottleneck_needs_its_queue():
    w = wan.Wan(prefix=PREFIX, rate_mbit=0, log=lambda m: None, delay_ab=1, delay_ba=1)  # no --limit-ab of its own
    with pytest.raises(ValueError, match="bottleneck 'qdisc'"):
        wan.Wan(prefix=PREFIX, bottleneck="qdisc", log=lambda m: None)
    os.environ["SLUICE_DELAYLINE_ARGS"] = "--rate-ab 100"  # without --limit-ab: refused, nothing left behind
    try:
        with pytest.raises(RuntimeError, match="delayline exited at start: .*--limit-ab"):
            w.up()
    finally:
        del os.environ["SLUICE_DELAYLINE_ARGS"]
        left = namespaces()
        w.down()  # if the line did start (the test fails), nothing of it outlives the test
    assert left == []
