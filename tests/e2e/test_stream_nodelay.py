"""The sender's data streams run with TCP_NODELAY (issue 17, session 14): frames are coalesced
where more follows (MSG_MORE, sendfile), and a stream's last partial segment (STREAM_END, the
tail of a batch) held by Nagle waited for the receiver's delayed ACK: 17-40 ms at the end of
most small-file updates. Checked by what the sender asks of the kernel (strace), not by time."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import SLUICE

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")


def test_every_data_stream_is_nodelay(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(20):
        (src / f"f{i}").write_bytes(bytes([i]) * (1000 + i))
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    trace = tmp_path / "trace"
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:  # scripts/test-asan: LeakSanitizer cannot run under ptrace (a fatal error, exit 1)
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect,setsockopt", "-o", str(trace),
                        SLUICE, "send", "--streams", "3", str(src), rx.url], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    rc, _, err = rx.wait()
    assert rc == 0, err
    # Per thread, the fd each connect() made, then the fds set TCP_NODELAY. Connects are counted
    # as calls, not fds: a number freed by one stream's socket is reused by the next (fd 7 twice
    # in one run), so fewer distinct fds than connections is normal.
    connects, connected, nodelay = 0, set(), set()
    for line in trace.read_text().splitlines():
        m = re.match(r"(\d+)\s+connect\((\d+), \{sa_family=AF_INET", line)
        if m:
            connects += 1
            connected.add(int(m.group(2)))
        m = re.match(r"(\d+)\s+setsockopt\((\d+), SOL_TCP, TCP_NODELAY, \[1\]", line)
        if m:
            nodelay.add(int(m.group(2)))
    assert connects >= 4, trace.read_text()  # the control connection and 3 data streams
    assert connected <= nodelay, f"connected {sorted(connected)}, TCP_NODELAY on {sorted(nodelay)}"
