"""Manifest pages (docs/protocol.md "Order of a transfer"): the sender's pages grow 64, 256, then
1,024 entries and no further, so a receiver checks one page while the walk fills the next (at
4,096 the check of the last full page of the minor set ran ~25 ms past the walk); pages go out
in order, numbered from 0, each starting at the entry after the last one's."""
import struct
import subprocess

from conftest import SLUICE
import sluice_wire as w
from test_dry_run import DryRunPeer


def test_pages_grow_to_1024_entries_in_order(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(2500):  # empty: a dry run's receiver asks for no data
        (src / f"f{i:04d}").write_bytes(b"")
    peer = DryRunPeer()
    try:
        r = subprocess.run([SLUICE, "send", "--dry-run", "--streams", "1", str(src),
                            f"sluice://127.0.0.1:{peer.port}/?token=testtoken"], capture_output=True, text=True, timeout=300)
    finally:
        peer.close()
    assert r.returncode == 0, r.stderr
    assert peer.error is None, peer.error
    pages = [struct.unpack_from("<IIQ", p) for t, p in peer.frames if t == w.MANIFEST]
    assert [seq for seq, _, _ in pages] == list(range(len(pages)))
    assert [count for _, count, _ in pages] == [64, 256, 1024, 1024, 2501 - 64 - 256 - 2048]
    first_ids = [fid for _, _, fid in pages]
    assert first_ids == [0, 64, 320, 1344, 2368]
