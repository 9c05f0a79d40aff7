"""bench/cost-vs-size/ceiling.py, the disk's ceiling for a copy (issue 19): its copy must move
exactly the set's bytes, or the rate it reports is not the rate of a copy. Files whose size is
not a multiple of the O_DIRECT block (their tail goes through a second, buffered fd), files of
several chunks, and empty files, with more chunks in flight than threads."""
import errno
import importlib.util
import os
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIZES = [0, 1, 4095, 4096, 4097, (1 << 20) - 1, 1 << 20, (3 << 20) + 777, 5_000_001]


def load_ceiling():
    spec = importlib.util.spec_from_file_location("ceiling", ROOT / "bench" / "cost-vs-size" / "ceiling.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def o_direct_works(d):
    try:
        fd = os.open(d / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    except OSError as e:
        if e.errno == errno.EINVAL:
            return False
        raise
    os.close(fd)
    os.unlink(d / "probe")
    return True


def test_the_copy_is_byte_exact(tmp_path):
    if not o_direct_works(tmp_path):
        pytest.skip(f"{tmp_path}: the file system refuses O_DIRECT, which ceiling.py measures")
    src = tmp_path / "src"
    for i, size in enumerate(SIZES):
        f = src / f"d{i % 3}" / f"f{i}.bin"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(os.urandom(size))
    ceiling = load_ceiling()
    a = types.SimpleNamespace(src=str(src), rbs=1, wbs=1, readers=3, writers=2, small_pages=False, no_write=False)
    files = sorted(str(p) for p in src.rglob("*.bin"))
    dst = tmp_path / "dst"
    dst.mkdir()
    ceiling.copy(a, files, str(dst))
    for f in files:
        rel = os.path.relpath(f, src)
        assert (dst / rel).read_bytes() == Path(f).read_bytes(), rel
    assert sorted(os.path.relpath(p, dst) for p in dst.rglob("*.bin")) == sorted(os.path.relpath(f, src) for f in files)


def test_disk_counters_are_rates_over_the_run():
    ceiling = load_ceiling()
    # /proc/diskstats fields 1-11: reads, merged, sectors read, ms reading, writes, merged,
    # sectors written, ms writing, in flight, ms busy, weighted ms.
    before = [0] * 11
    after = [100, 0, 200_000, 500, 50, 0, 100_000, 400, 0, 1_800, 9_000]
    s = ceiling.disk_summary(before, after, 2.0)
    assert s["read_mb_s"] == round(200_000 * 512 / 1e6 / 2, 1)
    assert s["read_req_kib"] == 1000.0 and s["write_req_kib"] == 1000.0
    assert s["read_ms"] == 5.0 and s["write_ms"] == 8.0
    assert s["queue_depth"] == 4.5 and s["util"] == 0.9
