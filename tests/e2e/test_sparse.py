"""Sparse files (issue 17): the sender finds data and holes with SEEK_DATA/SEEK_HOLE, lists the
data extents in the manifest and sends only them; the receiver leaves the holes as holes on
every receive path (no allocation over them), a resumed sparse file sends only what is
missing, and a manifest whose extents are out of range, overlapping or too many is refused."""
import json
import os
import random
import signal
import struct
import subprocess
import time

import pytest

import sluice_wire as w
from conftest import SLUICE, evict, file_hash, leftovers, run_sluice, wait_for

MiB = 1 << 20


def make_sparse(path, size, ranges, seed):
    """A file of `size` bytes with random data at `ranges` [(offset, length)] and holes elsewhere."""
    rng = random.Random(seed)
    with open(path, "wb") as f:
        f.truncate(size)
        for off, n in ranges:
            f.seek(off)
            f.write(rng.randbytes(n))
    return sum(n for _, n in ranges)


def allocated(path):
    return os.stat(path).st_blocks * 512


def sparse_tree(root):
    root.mkdir()
    data = 0
    # Data at the start, in the middle (not on a block edge) and a trailing hole.
    data += make_sparse(root / "image.bin", 256 * MiB, [(0, 4 * MiB), (100 * MiB + 4096, 3 * MiB + 8192)], 1)
    # All hole.
    make_sparse(root / "empty-disk.bin", 64 * MiB, [], 2)
    # A leading hole, data at the very end, size not a multiple of 4 KiB.
    data += make_sparse(root / "tail.bin", 40 * MiB + 123, [(40 * MiB - 4096, 4096 + 123)], 3)
    # Many small extents.
    data += make_sparse(root / "swiss.bin", 32 * MiB, [(k * 256 * 1024, 4096) for k in range(128)], 4)
    return data


@pytest.mark.parametrize("recv_path,send_path", [("direct", "splice"), ("recv_write", "sendfile"), ("splice", "read_send"),
                                                 ("direct", "zc")])
def test_a_sparse_file_arrives_sparse_and_equal(tmp_path, receiver_factory, recv_path, send_path):
    src = tmp_path / "src"
    data = sparse_tree(src)
    total = sum(p.stat().st_size for p in src.iterdir())
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--recv-path", recv_path)
    out = run_sluice("send", src, rx.url, "--json", "--send-path", send_path, "--block-size", "1M")
    assert out.returncode == 0, out.stderr
    rc, rout, err = rx.wait()
    assert rc == 0, err
    s, r = json.loads(out.stdout.splitlines()[-1]), json.loads(rout.splitlines()[-1])
    # Only the data crossed the wire; the holes were described.
    assert s["bytes_sent"] == data and s["bytes_holes"] == total - data, s
    assert r["bytes_holes"] == total - data, r
    for p in src.iterdir():
        q = dest / "src" / p.name
        assert q.stat().st_size == p.stat().st_size
        assert file_hash(q) == file_hash(p), p.name
        assert q.stat().st_mtime_ns == p.stat().st_mtime_ns
    # Allocated on the receiver: the data, give or take a file system block per extent edge.
    assert allocated(dest / "src" / "empty-disk.bin") == 0
    assert allocated(dest / "src" / "image.bin") <= 8 * MiB
    assert allocated(dest / "src" / "tail.bin") <= 64 * 1024
    assert allocated(dest / "src" / "swiss.bin") <= 128 * 8192
    assert leftovers(dest) == []


def test_cold_sparse_files_are_read_with_o_direct_per_data_extent(tmp_path, receiver_factory):
    # Not in the page cache, the data extents are read with O_DIRECT (issue 19): every data byte
    # and nothing of the holes, each block at its extent's offset, the file equal and sparse.
    src = tmp_path / "src"
    data = sparse_tree(src)
    evict(list(src.iterdir()))
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    out = run_sluice("send", src, rx.url, "--json", "--send-path", "splice", "--block-size", "1M")
    assert out.returncode == 0, out.stderr
    rc, _, err = rx.wait()
    assert rc == 0, err
    s = json.loads(out.stdout.splitlines()[-1])
    assert s["bytes_sent"] == data and s["bytes_read_direct"] == data, s
    for p in src.iterdir():
        assert file_hash(dest / "src" / p.name) == file_hash(p), p.name
    assert allocated(dest / "src" / "image.bin") <= 8 * MiB


def test_a_sparse_file_is_resumed_per_data_extent(tmp_path):
    from conftest import free_port
    src = tmp_path / "src"
    src.mkdir()
    data = make_sparse(src / "vm.img", 1 << 30, [(0, 24 * MiB), (512 * MiB, 24 * MiB)], 7)
    dest = tmp_path / "dest"
    dest.mkdir()
    port = free_port()

    def start_recv():
        p = subprocess.Popen([SLUICE, "recv", str(dest), "--bind", "127.0.0.1", "--port", str(port), "--token", "t", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline().startswith("sluice://")
        return p

    url = f"sluice://127.0.0.1:{port}/?token=t"
    args = [SLUICE, "send", str(src), url, "--block-size", "1M", "--streams", "2"]
    rx = start_recv()
    tx = subprocess.Popen(args + ["--rate-limit", "8M"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: any(p.name.endswith(".j") for p in dest.rglob(".sluice-part.*")), 30), "nothing was journaled"
    time.sleep(1.0)
    tx.send_signal(signal.SIGKILL)
    tx.communicate(timeout=60)
    rx.communicate(timeout=60)
    assert not (dest / "src" / "vm.img").exists()

    rx = start_recv()
    again = subprocess.run(args + ["--json"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    out, err = rx.communicate(timeout=60)
    assert rx.returncode == 0, err
    s = json.loads(again.stdout.splitlines()[-1])
    assert s["bytes_skipped"] > 0 and s["bytes_sent"] + s["bytes_skipped"] == data, s
    assert s["bytes_holes"] == (1 << 30) - data
    got = dest / "src" / "vm.img"
    assert file_hash(got) == file_hash(src / "vm.img")
    assert allocated(got) <= data + 4 * MiB
    assert leftovers(dest) == []


def refused(receiver_factory, tmp_path, entries):
    """Sends one sparse manifest page; returns the receiver's exit code and stderr."""
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    c, status = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, 1, os.urandom(16))
    assert status == 0
    c.sendall(w.sparse_manifest(0, entries))
    try:
        ftype, payload = w.read_frame(c)
    except (ConnectionError, OSError):
        ftype, payload = None, b""
    rc, out, err = rx.wait(timeout=60)
    c.close()
    assert ftype != w.MANIFEST_ACK, "the receiver acknowledged a bad extent list"
    assert leftovers(dest) == []
    return rc, err


@pytest.mark.parametrize("extents,why", [
    ([(0, 4096), (1 << 20, 4096 + 1)], "lies outside its size"),
    ([(8192, 4096), (4096, 4096)], "overlaps or precedes"),
    ([(0, 8192), (4096, 4096)], "overlaps or precedes"),
    ([(0, 0)], "is empty"),
    ([(1 << 64 - 1, 2)], "lies outside"),
])
def test_bad_extents_are_refused(tmp_path, receiver_factory, extents, why):
    rc, err = refused(receiver_factory, tmp_path, [(0, "f", 1 << 20, extents)])
    assert rc != 0 and why in err and "'f'" in err, err


def test_too_many_extents_are_refused_before_they_are_read(tmp_path, receiver_factory):
    # One more than the limit, each one 4 KiB apart: the count alone is refused.
    n = 65537
    rc, err = refused(receiver_factory, tmp_path, [(0, "many", n * 8192, [(k * 8192, 4096) for k in range(n)])])
    assert rc != 0 and "more than the limit of 65536" in err, err


def test_a_block_inside_a_declared_hole_is_refused(tmp_path, receiver_factory):
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    tid = os.urandom(16)
    c, _ = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, 1, tid)
    c.sendall(w.sparse_manifest(0, [(0, "f", 1 << 20, [(0, 4096)])]))
    assert w.read_frame(c)[0] == w.MANIFEST_ACK
    d, status = w.handshake("127.0.0.1", rx.port, "testtoken", 1, 1, 1, tid)
    assert status == 0
    # The checksum does not matter: the block is refused for where it lies, before its data
    # is written anywhere.
    d.sendall(w.frame(w.BLOCK, struct.pack("<QQQ", 0, 65536, 0) + b"x" * 4096))
    rc, out, err = rx.wait(timeout=60)
    d.close()
    c.close()
    assert rc != 0 and "lies in a hole" in err and "'f'" in err, err
    assert leftovers(dest) == []
