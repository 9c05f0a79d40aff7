"""What a receiver leaves in the page cache (issue 19): a transfer larger than memory must not
fill it with the files it wrote, or every later write lands in memory the kernel has not
handed out for a long time (on the project VM: a host fault per page, inside the copy)."""
import ctypes
import json
import os
import shutil

import pytest

from conftest import evict, run_sluice, write_random

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
PAGE = os.sysconf("SC_PAGE_SIZE")
WINDOW = 64 << 20  # WritebackWindow::kMaxBytes, per stream


def cached_bytes(path):
    """Bytes of the file now in the page cache (mincore over a read-only shared mapping)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = LIBC.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap " + str(path))
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = ctypes.create_string_buffer(pages)
            if LIBC.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore " + str(path))
            return sum(b & 1 for b in vec.raw) * PAGE
        finally:
            LIBC.munmap(addr, size)
    finally:
        os.close(fd)


@pytest.mark.parametrize("path", ["direct", "recv_write"])
def test_receiver_leaves_a_bounded_window_in_the_page_cache(tmp_path, receiver_factory, path):
    # 192 MiB in files of 512 KiB, one stream: three times the window. Without the window
    # every written page stays cached (nothing else here creates memory pressure); with it at
    # most the last window's files and the one being written are. (On the direct path files
    # under 1 MiB that arrive whole are written with O_DIRECT instead: less still.)
    src = tmp_path / "src" / "set"
    src.mkdir(parents=True)
    n, size = 384, 512 << 10
    for i in range(n):
        write_random(src / f"f{i:04d}.bin", size, seed=i)
    dst = tmp_path / "dst"
    dst.mkdir()
    r = receiver_factory(dst, "--recv-path", path)
    res = run_sluice("send", src, r.url, "--streams", "1", timeout=300)
    assert res.returncode == 0, res.stderr
    rc, _, err = r.wait(timeout=300)
    assert rc == 0, err
    got = dst / "set"
    total = sum(cached_bytes(got / f"f{i:04d}.bin") for i in range(n))
    assert sorted(p.name for p in got.iterdir()) == sorted(p.name for p in src.iterdir())
    assert total <= WINDOW + 2 * size, f"{total >> 20} MiB of {n * size >> 20} MiB received still cached"
    # The bytes are all there (read back now, which caches them again).
    for i in (0, n // 2, n - 1):
        assert (got / f"f{i:04d}.bin").read_bytes() == (src / f"f{i:04d}.bin").read_bytes()
    shutil.rmtree(tmp_path / "src")


# Whole small files around the 4 KiB direct-I/O unit: under a page, exact pages, a page and a byte.
SMALL_SIZES = [1, 100, 4095, 4096, 4097, 8192, 65536 + 123, 256 << 10, (400 << 10) + 5, (1 << 20) - 1]


def _whole_pages(size):
    return size // PAGE * PAGE


def _received_small(tmp_path, receiver_factory, *recv_args):
    src = tmp_path / "src" / "set"
    src.mkdir(parents=True)
    for i, size in enumerate(SMALL_SIZES):
        write_random(src / f"s{i:02d}.bin", size, seed=3000 + i)
        os.utime(src / f"s{i:02d}.bin", ns=(1_600_000_000_000_000_000 + i, 1_600_000_000_000_000_000 + i))
    dst = tmp_path / "dst"
    dst.mkdir()
    r = receiver_factory(dst, "-v", *recv_args)
    res = run_sluice("send", src, r.url, "--streams", "2", timeout=300)
    assert res.returncode == 0, res.stderr
    rc, out, err = r.wait(timeout=300)
    assert rc == 0, err
    return src, dst / "set", json.loads(out.splitlines()[-1]), err


def test_receiver_writes_whole_small_files_with_o_direct(tmp_path, receiver_factory):
    # The direct path writes a small file's whole pages with O_DIRECT (issue 19): counted in
    # bytes_written_direct exactly, and nothing but the last partial page is left cached.
    src, got, s, _ = _received_small(tmp_path, receiver_factory)
    assert s["recv_path"] == "direct" and s["fallbacks"] == [], s
    assert s["bytes_written_direct"] == sum(_whole_pages(n) for n in SMALL_SIZES), s
    for i, size in enumerate(SMALL_SIZES):
        p = got / f"s{i:02d}.bin"
        assert cached_bytes(p) <= (PAGE if size % PAGE else 0), (p, cached_bytes(p))
    for i, size in enumerate(SMALL_SIZES):
        p, q = got / f"s{i:02d}.bin", src / f"s{i:02d}.bin"
        st = p.stat()
        assert st.st_size == size and st.st_mtime_ns == q.stat().st_mtime_ns, (p, st)
        assert p.read_bytes() == q.read_bytes(), p
    assert not [n for n in os.listdir(got) if not n.endswith(".bin")]  # no temporary names left


def test_receiver_with_verify_writes_small_files_through_the_page_cache(tmp_path, receiver_factory):
    # --verify reads each file back by its temporary name, so small files keep the buffered
    # path: nothing counted as written direct.
    src, got, s, _ = _received_small(tmp_path, receiver_factory, "--verify")
    assert s["bytes_written_direct"] == 0, s
    assert s["bytes_verified_from_disk"] == sum(SMALL_SIZES), s
    for i in range(len(SMALL_SIZES)):
        assert (got / f"s{i:02d}.bin").read_bytes() == (src / f"s{i:02d}.bin").read_bytes()


def _small_set(root, n=160, size=256 << 10):
    root.mkdir(parents=True)
    for i in range(n):
        write_random(root / f"f{i:04d}.bin", size, seed=1000 + i)
    return [root / f"f{i:04d}.bin" for i in range(n)]


def _send(src, dst, receiver_factory):
    r = receiver_factory(dst)
    res = run_sluice("send", src, r.url, "--streams", "2", timeout=300)
    assert res.returncode == 0, res.stderr
    rc, _, err = r.wait(timeout=300)
    assert rc == 0, err


def test_sender_drops_the_pages_of_small_files_it_read_from_disk(tmp_path, receiver_factory):
    # Cold small files are read into memory for the checksum and sent from there; left cached,
    # a set larger than memory would fill it (issue 19). What was not cached is not left cached.
    files = _small_set(tmp_path / "src" / "set")
    evict(files)
    before = sum(cached_bytes(p) for p in files)
    assert before <= 4 * PAGE * len(files), f"could not evict the source ({before} bytes cached)"
    dst = tmp_path / "dst"
    dst.mkdir()
    _send(tmp_path / "src" / "set", dst, receiver_factory)
    after = sum(cached_bytes(p) for p in files)
    total = sum(os.path.getsize(p) for p in files)
    assert after <= before + total // 10, f"{after >> 10} KiB of {total >> 10} KiB read from disk still cached"
    for p in files[:3] + files[-3:]:
        assert (dst / "set" / p.name).read_bytes() == p.read_bytes()


def test_sender_leaves_cached_small_files_cached(tmp_path, receiver_factory):
    # The caller's page cache is not ours to empty: files that were cached stay cached.
    files = _small_set(tmp_path / "src" / "set")
    for p in files:
        p.read_bytes()
    total = sum(os.path.getsize(p) for p in files)
    assert sum(cached_bytes(p) for p in files) == total
    dst = tmp_path / "dst"
    dst.mkdir()
    _send(tmp_path / "src" / "set", dst, receiver_factory)
    assert sum(cached_bytes(p) for p in files) == total


def _large_set(root):
    # Above the small-file batch (512 KiB), sizes not a multiple of 4 KiB, one file of several blocks.
    root.mkdir(parents=True)
    sizes = [(5 << 20) + 77, (2 << 20) + 4095, 600 << 10, (3 << 20) + 1]
    for i, size in enumerate(sizes):
        write_random(root / f"g{i}.bin", size, seed=2000 + i)
    return [root / f"g{i}.bin" for i in range(len(sizes))]


def _send_json(src, dst, receiver_factory, *args):
    r = receiver_factory(dst)
    res = run_sluice("send", src, r.url, "--streams", "2", "--json", "-v", *args, timeout=300)
    assert res.returncode == 0, res.stderr
    rc, _, err = r.wait(timeout=300)
    assert rc == 0, err
    return json.loads(res.stdout.splitlines()[-1]), res.stderr


def test_sender_reads_cold_blocks_of_large_files_with_o_direct(tmp_path, receiver_factory):
    # Blocks not in the page cache are read with O_DIRECT and sent from that buffer (issue 19):
    # every byte of a cold set counted in bytes_read_direct, nothing left cached, said in -v.
    files = _large_set(tmp_path / "src" / "set")
    evict(files)
    before = sum(cached_bytes(p) for p in files)
    total = sum(os.path.getsize(p) for p in files)
    assert before <= 4 * PAGE * len(files), f"could not evict the source ({before} bytes cached)"
    dst = tmp_path / "dst"
    dst.mkdir()
    s, err = _send_json(tmp_path / "src" / "set", dst, receiver_factory, "--block-size", "1M")
    assert s["bytes_read_direct"] == total, s
    assert s["fallbacks"] == [], s
    assert "read with O_DIRECT (not in the page cache): 14 blocks" in err, err
    assert sum(cached_bytes(p) for p in files) <= before
    for p in files:
        assert (dst / "set" / p.name).read_bytes() == p.read_bytes()


def test_sender_sends_cached_large_files_from_the_page_cache(tmp_path, receiver_factory):
    # Cached blocks keep the zero-copy path: nothing read with O_DIRECT, and still all cached.
    files = _large_set(tmp_path / "src" / "set")
    for p in files:
        p.read_bytes()
    total = sum((os.path.getsize(p) + PAGE - 1) // PAGE * PAGE for p in files)  # whole pages
    assert sum(cached_bytes(p) for p in files) == total
    dst = tmp_path / "dst"
    dst.mkdir()
    s, err = _send_json(tmp_path / "src" / "set", dst, receiver_factory)
    assert s["bytes_read_direct"] == 0, s
    assert "read with O_DIRECT (not in the page cache): 0 blocks" in err, err
    assert sum(cached_bytes(p) for p in files) == total
    for p in files:
        assert (dst / "set" / p.name).read_bytes() == p.read_bytes()
