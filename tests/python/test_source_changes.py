"""Issue 14 from Python: a source truncated while it is sent raises sluice.SourceError and the
interpreter survives (before, the checksum read a mapping past the new end of file and SIGBUS
took the interpreter down); pre-1970 mtimes round-trip; pseudo-files and pipes named as
sources are refused, not sent empty.

The truncation happens at a known point: the LD_PRELOAD shim tests/shim/truncate_shim.c cuts
the file when the process first reads it at or beyond 2 MiB, where a block's checksum starts.
A preloaded library must be there when the interpreter starts, so that test runs a child
interpreter."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import Served, local_receiver

import sluice

MIB = 1 << 20
SHIM = os.environ.get("SLUICE_TRUNCATE_SHIM", "")

CHILD = textwrap.dedent("""
    import sys
    import threading
    import sluice
    src, dst = sys.argv[1], sys.argv[2]
    rx = sluice.Receiver(dst, bind_address="127.0.0.1", advertise_host="127.0.0.1")
    def serve():
        try:
            rx.wait()
        except sluice.Error:
            pass
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        sluice.send([src], rx.url, streams=1, block_size="1M")
        print("SENT")
    except sluice.Error as e:
        print("RAISED", type(e).__name__, e.code, e, flush=True)
    rx.cancel()
    t.join(60)
    print("ALIVE", flush=True)
""")


def test_a_source_truncated_while_it_is_sent_raises_and_the_interpreter_survives(tmp_path):
    assert SHIM and os.path.exists(SHIM), f"the truncation shim was not built: {SHIM!r}"
    src = tmp_path / "app.log"
    src.write_bytes(os.urandom(4 * MIB))
    dst = tmp_path / "dst"
    dst.mkdir()
    env = dict(os.environ, LD_PRELOAD=SHIM, SLUICE_TEST_TRUNCATE_MATCH=str(src),
               SLUICE_TEST_TRUNCATE_AT=str(2 * MIB), SLUICE_TEST_TRUNCATE_TO=str(2 * MIB + MIB // 2))
    p = subprocess.run([sys.executable, "-c", CHILD, str(src), str(dst)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert "sluice-test-shim: truncated" in p.stderr, p.stderr
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert (f"RAISED SourceError source source '{src}' shrank while being sent: expected {MIB} bytes at offset "
            f"{2 * MIB}, got {MIB // 2}") in p.stdout, p.stdout
    assert "ALIVE" in p.stdout
    assert not (dst / "app.log").exists()


def test_pre_1970_fractional_mtimes_round_trip(tmp_path, dst):
    src = tmp_path / "restored"
    src.mkdir()
    times = {"half": -500_000_000, "just-before": -1_000_000_001, "1906": -2_000_000_000_000_000_000 + 1}
    for name, ns in times.items():
        (src / name).write_bytes(name.encode())
        os.utime(src / name, ns=(ns, ns))
    rx = local_receiver(dst)
    served = Served(rx)
    sluice.send([src], rx.url, streams=2)
    served.join()
    for name, ns in times.items():
        assert (dst / "restored" / name).stat().st_mtime_ns == ns, name


def test_a_pseudo_file_or_a_pipe_named_as_a_source_is_refused(tmp_path, dst):
    rx = local_receiver(dst)
    with pytest.raises(sluice.SourceError, match=r"'/proc/cpuinfo' is a pseudo-file \(procfs\)"):
        sluice.send(["/proc/cpuinfo"], rx.url)
    r, w = os.pipe()
    try:
        with pytest.raises(sluice.SourceError, match="is a pipe or fifo.*sluice send - URL"):
            sluice.send([f"/proc/self/fd/{r}"], rx.url)
    finally:
        os.close(r)
        os.close(w)
    rx.cancel()
    assert list(Path(dst).iterdir()) == []
