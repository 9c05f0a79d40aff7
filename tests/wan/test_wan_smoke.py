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


def test_transfer_through_the_delay_line_and_teardown(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 << 20))
    dest = tmp_path / "dest"
    dest.mkdir()
    w = wan.Wan(prefix=PREFIX, delay_ab=1, delay_ba=1, rate_mbit=100, log=lambda m: None)
    with w:
        assert sorted(namespaces()) == sorted(w.ns(s) for s in "arb")
        recv = w.popen("b", [SLUICE, "recv", "--bind", wan.ADDR_B, "--port", 7116, "--token", "wantest", "--json",
                             "--cc", "cubic", dest], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert recv.stdout.readline().startswith("sluice://")
            send = w.ex("a", [SLUICE, "send", "--streams", 2, "--cc", "cubic", "--json", src,
                              f"sluice://{wan.ADDR_B}:7116/?token=wantest"], check=False, timeout=120)
            assert send.returncode == 0, send.stderr
            out, err = recv.communicate(timeout=60)
            assert recv.returncode == 0, err
        finally:
            if recv.poll() is None:
                recv.kill()
                recv.communicate()
        c = w.counters()
        s = json.loads(send.stdout.strip().splitlines()[-1])
    assert (dest / "src.bin").read_bytes() == src.read_bytes()
    assert s["congestion_control"] == "cubic"
    # Offloads are off: every frame is at most one MTU, so the data alone took this many frames.
    assert c["ab"]["tx"] >= (3 << 20) // 1514
    assert c["ab"]["lost"] == 0 and c["ab"]["overflow"] == 0
    assert c["ba"]["tx"] > 0  # ACKs came back through the line too
    # Its input sockets hold 256 MiB (doubled by the kernel): 32 MiB dropped tens of thousands of
    # frames from zero-copy senders at 20 ms while the line kept up (h16j).
    assert c["ab"]["rcvbuf"] >= 2 * (256 << 20) and c["ba"]["rcvbuf"] >= 2 * (256 << 20), c
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
