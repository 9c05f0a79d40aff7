"""Updates by changed blocks (issue 17): a receiver that already has another version of a file
gets only the blocks that differ (the JSON stats' bytes_sent), builds the new version beside
the old one and renames it into place (the old file stays intact if the transfer dies), a
growing file sends its tail, --checksum compares content when size and mtime match, and a
sender's REUSE that does not fit what the receiver offered is refused."""
import json
import os
import random
import signal
import struct
import subprocess
import time

import pytest

import sluice_wire as w
from conftest import SLUICE, file_hash, leftovers, run_sluice, wait_for

MiB = 1 << 20


def send(src, rx, *args):
    out = run_sluice("send", src, rx.url, "--json", "--block-size", "1M", *args)
    assert out.returncode == 0, out.stderr
    rc, rout, err = rx.wait()
    assert rc == 0, err
    return json.loads(out.stdout.splitlines()[-1]), json.loads(rout.splitlines()[-1])


def rewrite(path, offsets, seed, length=MiB):
    rng = random.Random(seed)
    with open(path, "r+b") as f:
        for off in offsets:
            f.seek(off)
            f.write(rng.randbytes(length))


def first_copy(tmp_path, receiver_factory, size, seed=1):
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "f.bin", "wb") as f:
        f.write(random.Random(seed).randbytes(size))
    dest = tmp_path / "dest"
    dest.mkdir()
    send(src, receiver_factory(dest))
    return src, dest


@pytest.mark.parametrize("recv_path", ["direct", "recv_write", "splice"])
def test_an_update_sends_only_the_changed_blocks(tmp_path, receiver_factory, recv_path):
    src, dest = first_copy(tmp_path, receiver_factory, 48 * MiB)
    old_inode = (dest / "src" / "f.bin").stat().st_ino
    rewrite(src / "f.bin", [3 * MiB, 40 * MiB + 4096], 2, 4096)  # two blocks touched
    s, r = send(src, receiver_factory(dest, "--recv-path", recv_path))
    assert s["bytes_sent"] == 2 * MiB and s["bytes_reused"] == 46 * MiB, s
    assert r["bytes_sent"] == 2 * MiB and r["bytes_reused"] == 46 * MiB, r
    got = dest / "src" / "f.bin"
    assert file_hash(got) == file_hash(src / "f.bin")
    assert got.stat().st_mtime_ns == (src / "f.bin").stat().st_mtime_ns
    assert got.stat().st_ino != old_inode  # a new file renamed over the old one
    assert leftovers(dest) == []


@pytest.mark.parametrize("old_size,grown", [(10 * MiB, 3 * MiB), (10 * MiB + 5000, 3 * MiB)])
def test_a_growing_file_sends_its_tail(tmp_path, receiver_factory, old_size, grown):
    src, dest = first_copy(tmp_path, receiver_factory, old_size, seed=3)
    with open(src / "f.bin", "ab") as f:
        f.write(random.Random(4).randbytes(grown))
    s, r = send(src, receiver_factory(dest))
    # The old last block, if it was short, is sent again with the tail.
    assert grown <= s["bytes_sent"] <= grown + (old_size % MiB), s
    assert s["bytes_reused"] == old_size // MiB * MiB
    assert file_hash(dest / "src" / "f.bin") == file_hash(src / "f.bin")


def test_checksum_compares_content_when_size_and_mtime_match(tmp_path, receiver_factory):
    src, dest = first_copy(tmp_path, receiver_factory, 16 * MiB, seed=5)
    st = (src / "f.bin").stat()
    rewrite(src / "f.bin", [7 * MiB], 6)
    os.utime(src / "f.bin", ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime, new content
    s, _ = send(src, receiver_factory(dest))
    assert s["bytes_sent"] == 0 and s["bytes_skipped"] == 16 * MiB, s  # trusted size and mtime
    assert file_hash(dest / "src" / "f.bin") != file_hash(src / "f.bin")
    s, _ = send(src, receiver_factory(dest), "--checksum")
    assert s["bytes_sent"] == MiB and s["bytes_reused"] == 15 * MiB, s
    assert file_hash(dest / "src" / "f.bin") == file_hash(src / "f.bin")
    # Equal content: nothing is sent and the file keeps its inode.
    inode = (dest / "src" / "f.bin").stat().st_ino
    s, _ = send(src, receiver_factory(dest), "-c")
    assert s["bytes_sent"] == 0 and s["bytes_reused"] == 16 * MiB, s
    assert (dest / "src" / "f.bin").stat().st_ino == inode


def test_the_old_file_stays_intact_when_an_update_is_killed(tmp_path):
    from conftest import free_port
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.bin").write_bytes(random.Random(7).randbytes(64 * MiB))
    dest = tmp_path / "dest"
    (dest / "src").mkdir(parents=True)
    (dest / "src" / "f.bin").write_bytes(random.Random(8).randbytes(64 * MiB))  # another version
    old = file_hash(dest / "src" / "f.bin")
    port = free_port()
    rx = subprocess.Popen([SLUICE, "recv", str(dest), "--bind", "127.0.0.1", "--port", str(port), "--token", "t"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert rx.stdout.readline().startswith("sluice://")
    tx = subprocess.Popen([SLUICE, "send", str(src), f"sluice://127.0.0.1:{port}/?token=t", "--block-size", "1M",
                           "--rate-limit", "8M"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Blocks are arriving in the new version's temporary file ...
    assert wait_for(lambda: any(p.name.endswith(".j") for p in dest.rglob(".sluice-part.*")), 30), "no block arrived"
    time.sleep(0.5)
    # ... and all the while the name holds the old version, whole.
    assert file_hash(dest / "src" / "f.bin") == old
    tx.send_signal(signal.SIGKILL)
    tx.communicate(timeout=60)
    rx.communicate(timeout=60)
    assert rx.returncode != 0
    assert file_hash(dest / "src" / "f.bin") == old


def hostile_update(tmp_path, receiver_factory, reuse_ranges, offered=True):
    """A hand-written sender: UPDATE_PARAMS, one page naming a file the receiver has in another
    version, then REUSE. Returns the receiver's exit code and stderr."""
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "f").write_bytes(b"a" * (4 * MiB))
    rx = receiver_factory(dest)
    c, status = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, 1, os.urandom(16))
    assert status == 0
    if offered:
        c.sendall(w.update_params(MiB))
    c.sendall(w.manifest(0, [(0, w.FILE, "f", 8 * MiB, "")]))
    ftype, payload = w.read_frame(c)
    if offered:
        assert ftype == w.BLOCK_SUMS
        fid, old_size, sums = w.decode_block_sums(payload)
        assert (fid, old_size, len(sums)) == (0, 4 * MiB, 4) and len(set(sums)) == 1
        ftype, payload = w.read_frame(c)
    assert ftype == w.MANIFEST_ACK
    c.sendall(w.reuse(0, reuse_ranges))
    rc, out, err = rx.wait(timeout=60)
    c.close()
    assert (dest / "f").read_bytes() == b"a" * (4 * MiB)  # the old version is untouched
    return rc, err


def test_reuse_past_the_old_size_is_refused(tmp_path, receiver_factory):
    rc, err = hostile_update(tmp_path, receiver_factory, [(0, 5 * MiB)])
    assert rc != 0 and "lies past its old or new size" in err and "'f'" in err, err


def test_reuse_of_a_version_never_offered_is_refused(tmp_path, receiver_factory):
    rc, err = hostile_update(tmp_path, receiver_factory, [(0, MiB)], offered=False)
    assert rc != 0 and "whose old version was not offered" in err, err


def test_overlapping_reuse_ranges_are_refused(tmp_path, receiver_factory):
    rc, err = hostile_update(tmp_path, receiver_factory, [(0, 2 * MiB), (MiB, MiB)])
    assert rc != 0 and "overlaps the one before" in err, err


def temp_name(rel):
    """The receiver's temporary name for rel (DestTree::temp_name: XXH3 of the path, 16 hex)."""
    import ctypes
    lib = ctypes.CDLL("libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    b = rel.encode()
    return ".sluice-part.%016x" % lib.XXH3_64bits(b, len(b))


@pytest.mark.parametrize("recv_path", ["direct", "recv_write", "splice"])
def test_files_take_their_place_over_what_an_earlier_run_left_under_their_temporary_names(tmp_path, receiver_factory,
                                                                                         recv_path):
    # The receiver links a replaced file under its temporary name straight away (its final name
    # is known to be taken) and skips the unlink of a journal that is not there: a temporary
    # file or a journal an earlier run left must still give way, for new files and replaced ones.
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    (dest / "src").mkdir(parents=True)
    rng = random.Random(5)
    for name in ("old1.bin", "old2.bin", "new.bin"):
        (src / name).write_bytes(rng.randbytes(100_000 + rng.randrange(100_000)))
        left = dest / "src" / temp_name("src/" + name)
        (left.parent / (left.name + ".j")).write_bytes(b"not a journal")
        if name != "new.bin":  # (a new file's unnamed inode is linked under its final name)
            (dest / "src" / name).write_bytes(rng.randbytes(50_000))  # another version
            left.write_bytes(b"left by an earlier run")
    s, _ = send(src, receiver_factory(dest, "--recv-path", recv_path))
    assert s["bytes_sent"] == sum(p.stat().st_size for p in src.iterdir()), s
    for name in ("old1.bin", "old2.bin", "new.bin"):
        assert file_hash(dest / "src" / name) == file_hash(src / name), name
    assert leftovers(dest) == []
