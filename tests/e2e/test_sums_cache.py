"""The receiver's block-sums cache (issue 17, docs/guarantees.md "The block-sums cache"): a file
received whole or by an update leaves its blocks' sums in the cache, the next update of it
offers them without reading the old version, and an entry that no longer describes the file
(content, size, mtime or inode changed; damaged; in a directory others may write) is never
used: the old version is hashed instead and the result is the sender's file."""
import json
import os
import random
import shutil
import struct

import pytest

from conftest import file_hash, run_sluice

MiB = 1 << 20
SIZE = 24 * MiB  # 24 blocks of 1 MiB: at least the 16 blocks a file needs to be cached


def send(src, rx, *args, block_size=("--block-size", "1M")):
    """`sluice send SRC` to rx (1 MiB blocks unless block_size says otherwise): both sides' stats."""
    out = run_sluice("send", src, rx.url, "--json", *block_size, *args)
    assert out.returncode == 0, out.stderr
    rc, rout, err = rx.wait()
    assert rc == 0, err
    return json.loads(out.stdout.splitlines()[-1]), json.loads(rout.splitlines()[-1])


def source_and_dest(tmp_path, seed):
    """src/f.bin of SIZE random bytes and an empty dest."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.bin").write_bytes(random.Random(seed).randbytes(SIZE))
    dest = tmp_path / "dest"
    dest.mkdir()
    return src, dest


def rewrite(path, offset, seed, length=4096):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(random.Random(seed).randbytes(length))


def entries(cache):
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


@pytest.fixture
def copied(tmp_path, receiver_factory):
    """A 24 MiB file sent into an empty destination with a cache: (src file, dest file, cache, rx args)."""
    src, dest = source_and_dest(tmp_path, 1)
    cache = tmp_path / "cache"
    args = ("--sums-cache", str(cache))
    s, r = send(src, receiver_factory(dest, *args))
    assert r["files_sums_stored"] == 1 and r["files_sums_hashed"] == 0, r
    got = dest / "src" / "f.bin"
    st = got.stat()
    assert entries(cache) == [f"{st.st_dev:x}-{st.st_ino:x}"]
    return src / "f.bin", got, cache, args


def test_an_update_takes_the_old_sums_from_the_cache(copied, receiver_factory):
    src, got, cache, args = copied
    for round_, off in enumerate([3 * MiB + 100, 17 * MiB]):
        rewrite(src, off, 10 + round_)
        s, r = send(src.parent, receiver_factory(got.parent.parent, *args))
        # Not read to be hashed: the sums came from the cache (and the new version's were stored).
        assert r["files_sums_cached"] == 1 and r["files_sums_hashed"] == 0, r
        assert r["files_sums_stored"] == 1, r
        assert s["bytes_sent"] == MiB and s["bytes_reused"] == SIZE - MiB, s
        assert file_hash(got) == file_hash(src)
    st = got.stat()
    assert f"{st.st_dev:x}-{st.st_ino:x}" in entries(cache)


def test_a_no_change_update_sends_no_data(copied, receiver_factory):
    src, got, cache, args = copied
    s, r = send(src.parent, receiver_factory(got.parent.parent, *args))
    assert s["bytes_sent"] == 0 and r["bytes_sent"] == 0 and s["bytes_skipped"] == SIZE, s
    assert r["files_sums_cached"] == 0 and r["files_sums_hashed"] == 0, r


def changed_behind_the_cache(got, how):
    st = got.stat()
    if how == "content, same size and mtime":
        rewrite(got, 5 * MiB, 99)  # the receiver's copy changes; only its ctime tells
        os.utime(got, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif how == "size":
        with open(got, "ab") as f:
            f.write(b"x" * 5000)
    elif how == "mtime":
        os.utime(got, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    elif how == "inode":
        tmp = got.with_name("copy")
        shutil.copy2(got, tmp)  # same bytes and mtime, another inode
        os.rename(tmp, got)
    elif how == "mode":
        os.chmod(got, 0o600)  # ctime only: the content is the same, the entry is still refused


@pytest.mark.parametrize("how", ["content, same size and mtime", "size", "mtime", "inode", "mode"])
def test_an_entry_that_no_longer_fits_the_file_is_not_used(copied, receiver_factory, how):
    src, got, cache, args = copied
    changed_behind_the_cache(got, how)
    rewrite(src, 9 * MiB, 20)
    s, r = send(src.parent, receiver_factory(got.parent.parent, *args))
    assert r["files_sums_cached"] == 0 and r["files_sums_hashed"] == 1, r
    assert file_hash(got) == file_hash(src)  # never a mix of the stale entry and the new blocks
    if how == "content, same size and mtime":
        assert s["bytes_sent"] == 2 * MiB, s  # the block changed behind the cache is sent too


@pytest.mark.parametrize("damage", ["a sum", "the key", "truncated", "the checksum"])
def test_a_damaged_entry_is_not_used(copied, receiver_factory, damage):
    src, got, cache, args = copied
    (entry,) = cache.iterdir()
    b = bytearray(entry.read_bytes())
    if damage == "a sum":
        b[64 + 8 * 9] ^= 1  # block 9's sum
    elif damage == "the key":
        b[24] ^= 1  # the size field
    elif damage == "truncated":
        del b[-16:]
    else:
        b[-1] ^= 1
    entry.write_bytes(bytes(b))
    rewrite(src, 9 * MiB, 21)
    s, r = send(src.parent, receiver_factory(got.parent.parent, *args))
    assert r["files_sums_cached"] == 0 and r["files_sums_hashed"] == 1, r
    assert s["bytes_sent"] == MiB, s
    assert file_hash(got) == file_hash(src)


def test_a_cache_others_may_write_to_is_not_used(copied, receiver_factory):
    src, got, cache, args = copied
    os.chmod(cache, 0o777)
    rewrite(src, 2 * MiB, 22)
    s, r = send(src.parent, receiver_factory(got.parent.parent, *args))
    assert r["files_sums_cached"] == 0 and r["files_sums_hashed"] == 1 and r["files_sums_stored"] == 0, r
    assert any("block-sums cache" in f and "alone" in f for f in r["fallbacks"]), r["fallbacks"]
    assert file_hash(got) == file_hash(src)


def test_the_entry_format(copied):
    """docs/protocol.md's layout: magic, dev, ino, size, mtime, ctime, block size, count, sums, XXH3."""
    src, got, cache, args = copied
    (entry,) = cache.iterdir()
    b = entry.read_bytes()
    assert b[:8] == b"SLSUMS01" and len(b) == 64 + 8 * 24 + 8
    dev, ino, size, mtime, ctime, block, count = struct.unpack("<7Q", b[8:64])
    st = got.stat()
    assert (dev, ino, size, mtime, ctime, block, count) == (st.st_dev, st.st_ino, SIZE, st.st_mtime_ns, st.st_ctime_ns, MiB, 24)
    assert oct(entry.stat().st_mode & 0o777) == "0o600" and oct(cache.stat().st_mode & 0o777) == "0o700"


def test_no_sums_cache_keeps_nothing(tmp_path, receiver_factory):
    src, dest = source_and_dest(tmp_path, 2)
    s, r = send(src, receiver_factory(dest, "--no-sums-cache"))
    assert r["files_sums_stored"] == 0, r
    rewrite(src / "f.bin", MiB, 23)
    s, r = send(src, receiver_factory(dest, "--no-sums-cache"))
    assert r["files_sums_cached"] == 0 and r["files_sums_hashed"] == 1 and s["bytes_sent"] == MiB, (s, r)
    assert file_hash(dest / "src" / "f.bin") == file_hash(src / "f.bin")
    bad = run_sluice("recv", dest, "--sums-cache", tmp_path / "c", "--no-sums-cache")
    assert bad.returncode != 0 and "contradict" in bad.stderr


def test_an_encrypted_transfer_caches_in_the_block_size_it_plans_with(tmp_path, receiver_factory):
    """Sealed in user space, a transfer plans 1 MiB blocks whatever --block-size's default; its
    UPDATE_PARAMS names that size, so each received block's checksum is one of the sums."""
    src, dest = source_and_dest(tmp_path, 3)
    args = ("--sums-cache", str(tmp_path / "cache"), "--encrypt")

    def send_enc():  # no --block-size: the sealed size is the sender's to choose
        return send(src, receiver_factory(dest, *args), "--encrypt", block_size=())

    s, r = send_enc()
    assert s["encryption_streams"] == "records" and s["block_size"] == MiB, s
    assert r["files_sums_stored"] == 1, r
    rewrite(src / "f.bin", 11 * MiB + 7, 30)
    s, r = send_enc()
    assert r["files_sums_cached"] == 1 and r["files_sums_hashed"] == 0, r
    assert s["bytes_sent"] == MiB and s["bytes_reused"] == SIZE - MiB, s
    assert file_hash(dest / "src" / "f.bin") == file_hash(src / "f.bin")
