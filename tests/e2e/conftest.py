"""Shared fixtures for end-to-end tests: the sluice binary, a receiver process, trees."""
import os
import random
import sys
import socket
import subprocess
import time
from pathlib import Path

import pytest

# The shared clean-up hooks live one folder up (tests/tmp_cleanup.py).
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tmp_cleanup import pytest_runtest_makereport, pytest_sessionfinish  # noqa: E402,F401 (hooks)

SLUICE = os.environ.get("SLUICE_BIN", str(Path(__file__).resolve().parents[2] / "build" / "tools" / "sluice"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_process(proc):
    """Kills a background sluice (if it still runs) and reaps it: every fixture's teardown."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


class Receiver:
    """`sluice recv` in the background; .url is the line it printed."""

    def __init__(self, dest, *args, token="testtoken", env=None, json=True):
        self.port = free_port()
        cmd = [SLUICE, "recv", str(dest), "--bind", "127.0.0.1", "--port", str(self.port)] + (["--json"] if json else [])
        if token:
            cmd += ["--token", token]
        self.proc = subprocess.Popen(cmd + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("sluice://"), self.proc.stderr.read()

    def wait(self, timeout=120):
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def kill(self):
        kill_process(self.proc)


@pytest.fixture(scope="session", autouse=True)
def sums_cache_home():
    """Receivers keep block sums under $XDG_CACHE_HOME (sluice recv --sums-cache's default): a
    directory of this run's own, removed at its end, not the user's ~/.cache."""
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="sluice-e2e-cache-")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = d
    yield d
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def receiver_factory():
    made = []

    def make(dest, *args, **kw):
        r = Receiver(dest, *args, **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.kill()


def run_sluice(*args, timeout=120, **kw):
    return subprocess.run([SLUICE, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


def evict(paths):
    """Drops the files' pages from the page cache (written back first), as a cold source."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cached_pages(path):
    """How many of the file's pages are in the page cache (cachestat(2), Linux 6.5+), or None
    where the kernel does not say."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    rng = (ctypes.c_uint64 * 2)(0, 0)  # the whole file
    out = (ctypes.c_uint64 * 5)()
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.syscall(451, fd, rng, out, 0) != 0:  # __NR_cachestat: the generic table's number
            return None
    finally:
        os.close(fd)
    return out[0]


def make_cold(path, tries=100):
    """Drops the file from the page cache and checks that it is gone: a test of the cold path
    must not pass through the warm one because a drop did not take (a page still locked for
    writeback, or in another CPU's LRU batch, is skipped by the kernel: asked again, bounded)."""
    for _ in range(tries):
        evict([path])
        if cached_pages(path) in (0, None):
            return
        time.sleep(0.05)
    raise AssertionError(f"{path}: still {cached_pages(path)} pages in the page cache after {tries} drops")


def write_random(path, size, seed):
    """Incompressible content, fast: a random 1 MiB pattern rotated per MiB."""
    rng = random.Random(seed)
    pattern = rng.randbytes(1 << 20)
    with open(path, "wb") as f:
        left, i = size, 0
        while left:
            k = (i * 7919) % len(pattern)
            chunk = (pattern[k:] + pattern[:k])[: min(left, 1 << 20)]
            f.write(chunk)
            left -= len(chunk)
            i += 1


def make_tree(root, big_size=1 << 30, small_files=2000, seed=1):
    """The tree the mover's issue asks for: a large file, many small ones, empty files and
    directories, a symlink, names with spaces and non-ASCII characters."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    write_random(root / "big.bin", big_size, seed)
    for i in range(small_files):
        d = root / f"small/d{i % 20:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}").write_bytes(rng.randbytes(rng.randint(1, 20000)))
    (root / "empty file").write_bytes(b"")
    (root / "empty dir" / "nested empty").mkdir(parents=True)
    (root / "naïve résumé — 日本語.txt").write_text("unicode name\n")
    (root / "with space" ).mkdir()
    (root / "with space" / "x y.dat").write_bytes(rng.randbytes(12345))
    os.symlink("big.bin", root / "link to big")
    os.symlink("/nonexistent/absolute", root / "dangling")
    os.chmod(root / "with space" / "x y.dat", 0o640)
    os.utime(root / "empty file", ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    return root


def tree_digest(root):
    """Everything a transfer must preserve, per relative path."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p), st.st_mtime_ns)
            elif p.is_dir():
                out[rel] = ("dir", st.st_mode & 0o777, st.st_mtime_ns)
            else:
                out[rel] = ("file", st.st_size, st.st_mode & 0o777, st.st_mtime_ns, file_hash(p))
    return out


def file_hash(p):
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def file_sha256(p):
    """What a user compares against the publisher's checksum (the serve tests' clients)."""
    import hashlib

    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def leftovers(root):
    """Temporary files a failed transfer must not leave behind."""
    return [str(p) for p in Path(root).rglob(".sluice-part.*")]


def journaled(root):
    """Journals (.sluice-part.*.j) under root that record at least one verified block: past the
    24-byte header, one 32-byte record (lib/recv/store/journal.hpp). A journal that exists but
    records nothing yet makes a resume that skips nothing."""
    out = []
    for p in Path(root).rglob(".sluice-part.*.j"):
        try:
            if p.stat().st_size >= 24 + 32:
                out.append(p)
        except FileNotFoundError:  # its file completed meanwhile
            pass
    return out


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def pytest_unconfigure(config):
    # After the last test the process still has to end: threads to join, pytest's clean-up of old
    # temporary dirs at exit. Once a run hung there until meson's timeout without a word, and once
    # it took 60 s: from 60 s after the last test on, every thread's Python stack is printed each
    # minute, so the log says where the exit waits (meson's timeout still ends it).
    import faulthandler
    import sys

    faulthandler.dump_traceback_later(60, repeat=True, file=sys.stderr)

