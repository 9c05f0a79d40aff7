"""Issue 16's stream reconnect: a data stream whose connection is reset mid-transfer is
reopened by the sender, the receiver tells it which of the blocks it wrote to the old
connection arrived whole (STREAM_RESUME), and the rest go out again on any stream; the
transfer completes without a restart. --retry-for 0 keeps the old behaviour (the break fails
the transfer)."""
import json

import pytest

from conftest import Receiver, run_sluice, write_random
from corrupting_proxy import CorruptingProxy


def through_proxy(src, dest, recv_args, send_args, **break_how):
    """Sends src to a receiver into dest through a proxy that breaks (break_how: reset=True or
    cut=True) the first connection to carry more than 5 MiB + 12345 bytes (a data stream: the
    control connection carries far less). Returns (send result, receiver's exit, stdout, stderr)."""
    rx = Receiver(dest, *recv_args, token="reconnect")
    proxy = CorruptingProxy(rx.port, at=(5 << 20) + 12345, **break_how)
    try:
        r = run_sluice("send", src, "--to", f"127.0.0.1:{proxy.port}", "--token", "reconnect", *send_args)
        code, out, err = rx.wait()
    finally:
        proxy.close()
        rx.kill()
    assert proxy.flipped  # the break happened
    return r, code, out, err


def reset_transfer(tmp_path, size, recv_args, send_args):
    """Sends a random file of `size` through the proxy, reset inside a block's data (1 MiB
    blocks plus a frame head each). Returns (send result, receiver's exit, stdout, stderr, src,
    dest)."""
    src = tmp_path / "f.bin"
    write_random(src, size, 16)
    dest = tmp_path / "dest"
    dest.mkdir()
    r, code, out, err = through_proxy(src, dest, recv_args, ["--block-size", "1M", *send_args], reset=True)
    return r, code, out, err, src, dest


@pytest.mark.parametrize("path", ["direct", "recv_write", "null"])
def test_a_data_stream_reset_mid_transfer_is_reopened_and_its_blocks_sent_again(tmp_path, path):
    size = 48 << 20
    r, code, out, err, src, dest = reset_transfer(tmp_path, size, ["--recv-path", path, "-v"],
                                                  ["--streams", "4", "--json", "-v"])
    assert r.returncode == 0, r.stderr
    assert code == 0, err
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["streams_reopened"] == 1, r.stderr
    # What the reset connection had not delivered went out again: at least the block cut in
    # two, at most the file. The blocks counted are the ones delivered, once each.
    assert (1 << 20) <= s["bytes_resent_after_break"] <= size
    assert s["bytes_sent"] == size and s["blocks"] == size >> 20
    assert "reopening it" in r.stderr and "reopened:" in r.stderr
    assert "broke" in err and "waiting for the sender to reopen it" in err and "reopened by the sender" in err
    assert json.loads(out.strip().splitlines()[-1])["blocks"] == size >> 20
    if path != "null":
        assert (dest / "f.bin").read_bytes() == src.read_bytes()


def test_without_retry_the_reset_fails_the_transfer_and_names_the_stream(tmp_path):
    r, code, _, err, _, dest = reset_transfer(tmp_path, 16 << 20, [], ["--streams", "2", "--retry-for", "0"])
    assert r.returncode != 0 and code != 0, (r.stderr, err)
    assert "data stream" in r.stderr + err
    assert not (dest / "f.bin").exists()


def test_a_block_cut_after_its_first_o_direct_writes_is_written_again_whole(tmp_path):
    # The direct path writes a large file's block with O_DIRECT 2 MiB at a time as it arrives.
    # With 8 MiB blocks and the reset 5 MiB into the first data stream to pass it, that stream's
    # first block has two such writes on disk when its connection breaks; the block goes out again
    # and is written again over them. The size is not a multiple of a page: the file's last page
    # is written padded and cut back.
    size = (40 << 20) + 777
    src = tmp_path / "f.bin"
    write_random(src, size, 19)
    dest = tmp_path / "dest"
    dest.mkdir()
    # Closed, not reset: a reset would throw away what the receiver had not yet read, and with it
    # maybe the writes this test is about; a close lets it read all 5 MiB before the end.
    r, code, out, err = through_proxy(src, dest, ["--recv-path", "direct"],
                                      ["--block-size", "8M", "--streams", "2", "--json"], cut=True)
    assert r.returncode == 0, r.stderr
    assert code == 0, err
    s = json.loads(r.stdout.strip().splitlines()[-1])
    got = json.loads(out.strip().splitlines()[-1])
    assert s["streams_reopened"] == 1, r.stderr
    assert s["bytes_resent_after_break"] >= 8 << 20, s
    # Written with O_DIRECT: the whole file once (its last page padded) and, before the break,
    # at least the first 4 MiB of the block that was cut: that block's range was written twice.
    assert got["bytes_written_direct"] >= size + (4 << 20), got
    assert (dest / "f.bin").read_bytes() == src.read_bytes()


@pytest.mark.parametrize("path", ["direct", "recv_write"])
def test_a_file_of_one_block_cut_by_a_reset_is_sent_again_and_taken(tmp_path, path):
    # Files of one block each (700 KiB: above the small-file batch, below the direct path's
    # O_DIRECT size, so it writes each into an unnamed inode). The reset 5 MiB into the first
    # stream to pass it lands inside a block's data wherever the stream's files were (every frame
    # is 700 KiB + 32 bytes). The receiver gives up the cut block's claim before it answers the
    # reopened stream (STREAM_RESUME); the copy sent again, on any stream, is taken, not refused
    # as the same whole-file block on two streams at once (FileTable::claim).
    src = tmp_path / "src"
    src.mkdir()
    size = 700 << 10
    for i in range(40):
        write_random(src / f"f{i:02}", size, 100 + i)
    dest = tmp_path / "dest"
    dest.mkdir()
    r, code, out, err = through_proxy(src, dest, ["--recv-path", path, "-v"],
                                      ["--block-size", "1M", "--streams", "2", "--json", "-v"], reset=True)
    assert r.returncode == 0, r.stderr
    assert code == 0, err
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["streams_reopened"] == 1, r.stderr
    assert s["bytes_resent_after_break"] >= size, s  # at least the file cut in two
    assert "waiting for the sender to reopen it" in err
    for i in range(40):
        assert (dest / "src" / f"f{i:02}").read_bytes() == (src / f"f{i:02}").read_bytes(), i
