"""Issue 16: a data stream reset mid-transfer, through bench/wan's emulator. The sender's end of
one data connection is destroyed with `ss -K` once it has carried 4 MiB (the kernel resets it;
no proxy, whose buffers would count as delivered); sluice reopens the stream and sends again
what the broken connection had not delivered. With --bounded-resend that is at most one block
(bytes_resent_after_break from the sender's stats), and the transfer completes without a
restart, the copy identical. Counts only, no timing: the link is 5 ms each way, 100 Mbit/s."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "wan"))
import reset  # noqa: E402
import wan  # noqa: E402

SLUICE = os.environ.get("SLUICE_BIN", str(ROOT / "build" / "tools" / "sluice"))
PREFIX = f"slwr{os.getpid() % 100000}"  # never the suite's namespace names, nor another run's
BLOCK = 1 << 20

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ethtool") or not shutil.which("tc") or not shutil.which("ss"),
    reason="the emulator needs root, ethtool, tc and ss")


def test_a_reset_data_stream_resends_at_most_one_block_with_bounded_resend(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(40 << 20))
    dest = tmp_path / "dest"
    dest.mkdir()
    w = wan.Wan(prefix=PREFIX, delay_ab=5, delay_ba=5, rate_mbit=100, log=lambda m: None)
    with w:
        # Killed at 4 MiB of the ~10 MiB each stream carries: at 8 MiB (before) the first stream
        # to get there could already have been handed its last block under load, and a stream
        # with nothing left to send needs no reopening (streams_reopened 0: seen once, h16p).
        r = reset.reset_run(w, SLUICE, src, dest, "4", str(BLOCK), True, 4 << 20, deadline_s=300)
    assert r["streams_reopened"] == 1, r
    assert r["bytes_resent_after_break"] <= BLOCK, r  # the goal: one block per stream at most
    assert r["bytes_sent"] == 40 << 20, r  # no restart: every block delivered once
    assert any("reopened" in line for line in r["reopen_lines"]), r
    assert subprocess.run(["cmp", "-s", src, dest / "src.bin"]).returncode == 0
