"""Loopback transfers checked byte for byte, with metadata, over 1, 4 and 16 streams."""
import json
import os
import stat

import pytest

from conftest import leftovers, make_tree, run_sluice, tree_digest, write_random


@pytest.fixture(scope="module")
def source_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("src") / "tree"
    return make_tree(root)


@pytest.mark.parametrize("streams", [1, 4, 16])
def test_tree_arrives_identical(source_tree, tmp_path, receiver_factory, streams):
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", source_tree, rx.url, "--streams", streams, "--json")
    assert sent.returncode == 0, sent.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    assert tree_digest(dest / "tree") == tree_digest(source_tree)
    assert leftovers(dest) == []
    s = json.loads(sent.stdout.strip().splitlines()[-1])
    r = json.loads(out.strip().splitlines()[-1])
    assert s["streams"] == streams and r["streams"] == streams
    assert s["send_path"] == "splice" and s["fallbacks"] == []
    assert r["recv_path"] == "direct" and r["fallbacks"] == []
    assert s["files"] == r["files"] == 2000 + 4
    assert s["bytes"] == r["bytes"] == r["bytes_sent"]
    assert s["symlinks"] == 2
    assert r["cpu_user_s"] + r["cpu_sys_s"] > 0


@pytest.mark.parametrize("send_path,recv_path", [("sendfile", "splice"), ("read_send", "recv_write"), ("splice", "splice"), ("sendfile", "direct"),
                                                ("zc", "direct"), ("zc", "recv_write"), ("zc", "splice")])
def test_every_path_pair_moves_the_same_bytes(tmp_path, receiver_factory, send_path, recv_path):
    src = make_tree(tmp_path / "src", big_size=(40 << 20) + 4097, small_files=300, seed=2)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--recv-path", recv_path)
    sent = run_sluice("send", src, rx.url, "--streams", 3, "--block-size", "1M", "--send-path", send_path, "--json")
    assert sent.returncode == 0, sent.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    assert tree_digest(dest / "src") == tree_digest(src)
    assert json.loads(sent.stdout.splitlines()[-1])["send_path"] == send_path
    assert json.loads(out.splitlines()[-1])["recv_path"] == recv_path


@pytest.mark.parametrize("send_path", ["splice", "sendfile", "zc"])
def test_mid_size_files_sent_by_sendfile_arrive_identical(tmp_path, receiver_factory, send_path):
    # 64 KiB-512 KiB whole files leave the small-file batch through sendfile (after being read
    # for their checksum); the files around the threshold and the batch limit, mixed with
    # buffered tiny files in the same streams, check the two interleave in frame order.
    src = tmp_path / "src"
    sizes = [1, 4096, 65535, 65536, 65537, 100_000, 262_144, 524_287, 524_288, 524_289] + [
        (i * 7919) % (600 << 10) + 1 for i in range(120)]
    for i, n in enumerate(sizes):
        d = src / f"d{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        write_random(d / f"f{i:04d}", n, seed=100 + i)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url, "--streams", 3, "--send-path", send_path, "--json")
    assert sent.returncode == 0, sent.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    assert tree_digest(dest / "src") == tree_digest(src)
    r = json.loads(out.strip().splitlines()[-1])
    assert r["files"] == len(sizes) and r["checksum_failures"] == 0


def test_null_sink_verifies_but_writes_nothing(tmp_path, receiver_factory):
    src = make_tree(tmp_path / "src", big_size=8 << 20, small_files=50, seed=3)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--sink", "null")
    assert run_sluice("send", src, rx.url).returncode == 0
    rc, out, err = rx.wait()
    assert rc == 0, err
    assert list(dest.iterdir()) == []
    assert json.loads(out.splitlines()[-1])["bytes_sent"] == json.loads(out.splitlines()[-1])["bytes"]


def test_several_sources_and_a_single_file(tmp_path, receiver_factory):
    a = tmp_path / "a.txt"
    a.write_bytes(b"a" * 100)
    b = make_tree(tmp_path / "b", big_size=1 << 20, small_files=5, seed=4)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    assert run_sluice("send", a, b, "--to", f"127.0.0.1:{rx.port}", "--token", "testtoken").returncode == 0
    assert rx.wait()[0] == 0
    assert (dest / "a.txt").read_bytes() == b"a" * 100
    assert tree_digest(dest / "b") == tree_digest(b)


def test_existing_files_are_replaced_whole(tmp_path, receiver_factory):
    src = tmp_path / "f.bin"
    src.write_bytes(b"new" * 1000)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "f.bin").write_bytes(b"old" * 100000)
    rx = receiver_factory(dest)
    assert run_sluice("send", src, rx.url).returncode == 0
    assert rx.wait()[0] == 0
    assert (dest / "f.bin").read_bytes() == b"new" * 1000


def test_special_files_are_skipped_with_a_warning(tmp_path, receiver_factory):
    src = tmp_path / "s"
    src.mkdir()
    (src / "regular").write_text("x")
    os.mkfifo(src / "a fifo")
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url, "--json", "--no-specials")
    assert sent.returncode == 0, sent.stderr
    assert "skipping fifo" in sent.stderr and "a fifo" in sent.stderr
    assert rx.wait()[0] == 0
    assert (dest / "s" / "regular").read_text() == "x"
    assert not (dest / "s" / "a fifo").exists()
    assert json.loads(sent.stdout.splitlines()[-1])["skipped_entries"] == 1


def test_setuid_bits_from_the_network_are_dropped(tmp_path, receiver_factory):
    src = tmp_path / "tool"
    src.write_bytes(b"#!/bin/sh\n")
    os.chmod(src, 0o4755)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    assert run_sluice("send", src, rx.url, "--no-owner").returncode == 0
    assert rx.wait()[0] == 0
    assert stat.S_IMODE((dest / "tool").stat().st_mode) == 0o755


def test_rate_limit_caps_the_rate(tmp_path, receiver_factory):
    src = tmp_path / "f"
    src.write_bytes(os.urandom(24 << 20))
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url, "--rate-limit", "16M", "--streams", "4", "--block-size", "1M", "--json")
    assert sent.returncode == 0, sent.stderr
    assert rx.wait()[0] == 0
    # 24 MiB at 16 MiB/s with a quarter-second burst cannot finish in under ~1.25 s.
    assert json.loads(sent.stdout.splitlines()[-1])["seconds"] >= 1.2


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a ramfs needs root")
def test_fallback_from_direct_writes_is_reported(tmp_path, receiver_factory):
    import subprocess

    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(3 << 20))
    dest = tmp_path / "ramfs"  # ramfs refuses O_DIRECT (tmpfs accepts it since Linux 6.6)
    dest.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(dest)], check=True)
    try:
        rx = receiver_factory(dest, "-v")
        assert run_sluice("send", src, rx.url).returncode == 0
        rc, out, err = rx.wait()
        assert rc == 0, err
        stats = json.loads(out.splitlines()[-1])
        assert any("O_DIRECT" in f for f in stats["fallbacks"]), stats
        assert "slower path" in err
        assert (dest / "f.bin").read_bytes() == src.read_bytes()
    finally:
        subprocess.run(["umount", str(dest)])


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a ramfs needs root")
def test_small_files_on_a_destination_without_o_direct(tmp_path, receiver_factory):
    # Whole small files are written with O_DIRECT on the direct path; ramfs refuses it: the
    # stream writes them through the page cache, and says so.
    import subprocess

    src = tmp_path / "small"
    src.mkdir()
    sizes = [1, 4096, 5000, 300 << 10]
    for i, n in enumerate(sizes):
        (src / f"f{i}").write_bytes(os.urandom(n))
    dest = tmp_path / "ramfs"
    dest.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(dest)], check=True)
    try:
        rx = receiver_factory(dest, "-v")
        sent = run_sluice("send", src, rx.url, "--streams", "1")
        assert sent.returncode == 0, sent.stderr
        rc, out, err = rx.wait()
        assert rc == 0, err
        stats = json.loads(out.splitlines()[-1])
        assert stats["bytes_written_direct"] == 0, stats
        assert any("small files written through the page cache" in f for f in stats["fallbacks"]), stats
        assert "slower path" in err
        for i, n in enumerate(sizes):
            assert (dest / "small" / f"f{i}").read_bytes() == (src / f"f{i}").read_bytes()
    finally:
        subprocess.run(["umount", str(dest)])


# Sizes around the 4 KiB direct-I/O unit, the 1 MiB buffers and direct-I/O threshold of zc and
# direct, and the block size: every tail that is not a multiple of 4 KiB.
ODD_SIZES = [1, 4095, 4097, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, (3 << 20) + 4095, (2 << 20) + 1, (5 << 20) + 12345]


@pytest.mark.parametrize("recv_path", ["direct", "recv_write", "splice"])
def test_odd_sized_files_through_zc(tmp_path, receiver_factory, recv_path):
    src = tmp_path / "odd"
    src.mkdir()
    for i, n in enumerate(ODD_SIZES):
        (src / f"f{i}_{n}").write_bytes(os.urandom(n))
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--recv-path", recv_path)
    sent = run_sluice("send", src, rx.url, "--streams", 2, "--block-size", "2M", "--send-path", "zc", "--json")
    assert sent.returncode == 0, sent.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    for i, n in enumerate(ODD_SIZES):
        assert (dest / "odd" / f"f{i}_{n}").read_bytes() == (src / f"f{i}_{n}").read_bytes()
    s = json.loads(sent.stdout.splitlines()[-1])
    assert s["send_path"] == "zc"
    # Over loopback the kernel copies zero-copy sends; that, and nothing else, is reported.
    assert all("copied" in f for f in s["fallbacks"]), s["fallbacks"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a ramfs needs root")
def test_zc_from_a_source_refusing_direct_reads_is_reported(tmp_path, receiver_factory):
    import subprocess

    src = tmp_path / "ramfs"
    src.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(src)], check=True)
    try:
        (src / "f.bin").write_bytes(os.urandom((3 << 20) + 77))
        dest = tmp_path / "dest"
        dest.mkdir()
        rx = receiver_factory(dest)
        sent = run_sluice("send", src, rx.url, "--send-path", "zc", "--json")
        assert sent.returncode == 0, sent.stderr
        rc, out, err = rx.wait()
        assert rc == 0, err
        s = json.loads(sent.stdout.splitlines()[-1])
        assert any("refuses O_DIRECT" in f for f in s["fallbacks"]), s
        assert (dest / "ramfs" / "f.bin").read_bytes() == (src / "f.bin").read_bytes()
    finally:
        subprocess.run(["umount", str(src)])


@pytest.mark.parametrize("recv_path", ["direct", "recv_write", "splice"])
def test_a_block_corrupted_in_flight_is_sent_again(tmp_path, receiver_factory, recv_path):
    from corrupting_proxy import CorruptingProxy

    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(6 << 20))
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--recv-path", recv_path)
    proxy = CorruptingProxy(rx.port, at=500_000)  # inside the first 1 MiB block's data
    try:
        sent = run_sluice("send", src, "--to", f"127.0.0.1:{proxy.port}", "--token", "testtoken",
                          "--block-size", "1M", "--streams", "1", "--json")
        assert sent.returncode == 0, sent.stderr
        rc, out, err = rx.wait()
        assert rc == 0, err
    finally:
        proxy.close()
    assert proxy.flipped
    assert (dest / "f.bin").read_bytes() == src.read_bytes()
    s = json.loads(sent.stdout.splitlines()[-1])
    r = json.loads(out.splitlines()[-1])
    assert r["checksum_failures"] == 1 and s["checksum_failures"] == 1
    assert "checksum mismatch in 'f.bin'" in err


@pytest.mark.parametrize("recv_path", ["direct", "recv_write"])
def test_verify_reads_every_block_back_from_disk(tmp_path, receiver_factory, recv_path):
    src = make_tree(tmp_path / "src", big_size=(20 << 20) + 777, small_files=40, seed=41)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--verify", "--recv-path", recv_path)
    assert run_sluice("send", src, rx.url, "--block-size", "1M").returncode == 0
    rc, out, err = rx.wait()
    assert rc == 0, err
    r = json.loads(out.splitlines()[-1])
    assert r["bytes_verified_from_disk"] == r["bytes"] > 0
    assert tree_digest(dest / "src") == tree_digest(src)


def test_a_corrupted_small_file_is_sent_again(tmp_path, receiver_factory):
    # A file that arrives whole in one block is written into an unnamed O_TMPFILE inode; a bad
    # checksum there must still be asked for again, and nothing linked before it matches.
    from corrupting_proxy import CorruptingProxy

    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"s{i}.bin").write_bytes(os.urandom(300_000))
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    proxy = CorruptingProxy(rx.port, at=150_000)  # inside the first small file's data
    try:
        sent = run_sluice("send", src, "--to", f"127.0.0.1:{proxy.port}", "--token", "testtoken",
                          "--streams", "1", "--json")
        assert sent.returncode == 0, sent.stderr
        rc, out, err = rx.wait()
        assert rc == 0, err
    finally:
        proxy.close()
    assert proxy.flipped
    assert tree_digest(dest / "src") == tree_digest(src)
    assert leftovers(dest) == []
    assert json.loads(out.splitlines()[-1])["checksum_failures"] == 1


@pytest.mark.parametrize("send_path,block_size", [("splice", "8M"), ("sendfile", "256K")])
def test_files_around_the_small_file_batch_limit(tmp_path, receiver_factory, send_path, block_size):
    # Whole files up to 512 KiB are read into a buffer and sent many per send; larger ones, and
    # files cut into several blocks, take the send path itself. Every size around those limits
    # must arrive intact, interleaved in one work item.
    src = tmp_path / "src"
    src.mkdir()
    rng = __import__("random").Random(7)
    sizes = [1, 4095, 4096, 256 << 10, (512 << 10) - 1, 512 << 10, (512 << 10) + 1, 1 << 20, 3 << 20]
    for i, n in enumerate(sizes * 3):
        (src / f"f{i:02d}-{n}").write_bytes(rng.randbytes(n))
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "-v")
    sent = run_sluice("send", src, rx.url, "--streams", 2, "--block-size", block_size, "--send-path", send_path,
                      "--json", "-v")
    assert sent.returncode == 0, sent.stderr
    assert "small files (up to 512 KiB" in sent.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    assert tree_digest(dest / "src") == tree_digest(src)
    assert leftovers(dest) == []
