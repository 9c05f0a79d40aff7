"""Shared helpers for the Python package tests: generated trees, byte-for-byte comparison,
a receiver served on a background thread."""
import os
import random
import sys
import threading

import pytest

# The shared clean-up hooks live one folder up (tests/tmp_cleanup.py).
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tmp_cleanup import pytest_runtest_makereport, pytest_sessionfinish  # noqa: E402,F401 (hooks)


def make_tree(root, seed=7, big=24 << 20):
    """A tree with nested dirs, an empty file and an empty dir, small files, a file larger than
    several blocks (so all streams carry data) and a symlink. Returns root."""
    rng = random.Random(seed)
    (root / "a" / "b").mkdir(parents=True)
    (root / "empty_dir").mkdir()
    (root / "empty_file").write_bytes(b"")
    for i in range(20):
        d = root / ("a" if i % 2 else "a/b")
        (root / d / f"small{i}.bin").write_bytes(rng.randbytes(rng.randrange(1, 200_000)))
    (root / "big.bin").write_bytes(rng.randbytes(big))
    os.chmod(root / "a" / "small1.bin", 0o600)
    os.symlink("a/small1.bin", root / "link")
    return root


def tree_listing(root):
    """Every entry under root with its kind, mode and content (bytes or link target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir", st.st_mode & 0o777)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", st.st_mode & 0o777, f.read())
    return out


def assert_same_tree(src, dst):
    a, b = tree_listing(src), tree_listing(dst)
    assert sorted(a) == sorted(b)
    for rel in a:
        assert a[rel] == b[rel], f"{rel} differs"


class Served:
    """Receiver.wait() running on a thread; join() returns its stats or raises its error."""

    def __init__(self, rx, **wait_kwargs):
        self.rx = rx
        self.stats = None
        self.error = None
        self.thread = threading.Thread(target=self._run, kwargs=wait_kwargs, daemon=True)
        self.thread.start()

    def _run(self, **kw):
        try:
            self.stats = self.rx.wait(**kw)
        except BaseException as e:  # handed to the test thread by join()
            self.error = e

    def join(self, timeout=120):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "Receiver.wait() did not return"
        if self.error is not None:
            raise self.error
        return self.stats


def local_receiver(dst, **kw):
    """A receiver on 127.0.0.1 into dst (or, with dst None, into kw's fd or sink)."""
    import sluice  # here, not at the top: test_pip_install.py runs without the build-dir package

    return sluice.Receiver(dst, bind_address="127.0.0.1", advertise_host="127.0.0.1", **kw)


@pytest.fixture
def tree(tmp_path):
    return make_tree(tmp_path / "src")


@pytest.fixture
def dst(tmp_path):
    d = tmp_path / "dst"
    d.mkdir()
    return d


def pytest_unconfigure(config):
    # After the last test the process still has to end: threads to join, pytest's clean-up of old
    # temporary dirs at exit. Once a run hung there until meson's timeout without a word, and once
    # it took 60 s: from 60 s after the last test on, every thread's Python stack is printed each
    # minute, so the log says where the exit waits (meson's timeout still ends it).
    import faulthandler
    import sys

    faulthandler.dump_traceback_later(60, repeat=True, file=sys.stderr)
