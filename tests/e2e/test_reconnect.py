"""Issue 16's stream reconnect: a data stream whose connection is reset mid-transfer is
reopened by the sender, the receiver tells it which of the blocks it wrote to the old
connection arrived whole (STREAM_RESUME), and the rest go out again on any stream; the
transfer completes without a restart. --retry-for 0 keeps the old behaviour (the break fails
the transfer: test_resume.py)."""
import json

import pytest

from conftest import Receiver, run_sluice, write_random
from cutting_proxy import CuttingProxy

SIZE = 48 << 20


@pytest.mark.parametrize("path", ["direct", "recv_write", "null"])
def test_a_data_stream_reset_mid_transfer_is_reopened_and_its_blocks_sent_again(tmp_path, path):
    src = tmp_path / "f.bin"
    write_random(src, SIZE, 16)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = Receiver(dest, "--recv-path", path, "-v", token="reconnect")
    # Connection 0 is the control connection, 1 the first data stream to connect; cut inside
    # a block's data (blocks of 1 MiB plus a 32-byte frame head).
    proxy = CuttingProxy(rx.port, which=1, at=(5 << 20) + 12345)
    try:
        r = run_sluice("send", src, "--to", f"127.0.0.1:{proxy.port}", "--token", "reconnect", "--block-size", "1M",
                       "--streams", "4", "--json", "-v")
        code, out, err = rx.wait()
    finally:
        proxy.close()
        rx.kill()
    assert proxy.cut_done.is_set()
    assert r.returncode == 0, r.stderr
    assert code == 0, err
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["streams_reopened"] == 1, r.stderr
    # What the cut connection had not delivered went out again: at least the block cut in
    # two, at most the file. The blocks counted are the ones delivered, once each.
    assert (1 << 20) <= s["bytes_resent_after_break"] <= SIZE
    assert s["bytes_sent"] == SIZE and s["blocks"] == SIZE >> 20
    assert "reopening it" in r.stderr and "reopened:" in r.stderr
    assert "broke" in err and "waiting for the sender to reopen it" in err and "reopened by the sender" in err
    rs = json.loads(out.strip().splitlines()[-1])
    assert rs["blocks"] == SIZE >> 20
    if path != "null":
        assert (dest / "f.bin").read_bytes() == src.read_bytes()


def test_without_retry_the_reset_fails_the_transfer_and_names_the_stream(tmp_path):
    src = tmp_path / "f.bin"
    write_random(src, 16 << 20, 17)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = Receiver(dest, token="reconnect")
    proxy = CuttingProxy(rx.port, which=1, at=(3 << 20) + 99)
    try:
        r = run_sluice("send", src, "--to", f"127.0.0.1:{proxy.port}", "--token", "reconnect", "--block-size", "1M",
                       "--streams", "2", "--retry-for", "0")
        code, _, err = rx.wait()
    finally:
        proxy.close()
        rx.kill()
    assert proxy.cut_done.is_set()
    assert r.returncode != 0 and code != 0, (r.stderr, err)
    assert "data stream" in r.stderr + err
    assert not (dest / "f.bin").exists()
