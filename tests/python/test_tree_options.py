"""send()'s tree options reach the library as the CLI's do: hard links, xattrs, filters,
delete, checksum; Receiver(numeric_ids=, usermap=, groupmap=, sums_cache=) too. Each option is checked by what lands on disk."""
import os

import pytest

from conftest import Served, local_receiver

import sluice


@pytest.fixture
def src(tmp_path):
    s = tmp_path / "src"
    (s / "logs").mkdir(parents=True)
    (s / "a").write_bytes(b"linked twice")
    os.link(s / "a", s / "b")
    os.setxattr(s / "a", "user.tag", b"kept")
    (s / "logs" / "x.log").write_bytes(b"excluded")
    (s / "logs" / "keep.log").write_bytes(b"included")
    return s


def transfer(src, dst, rx_kw=None, **send_kw):
    rx = local_receiver(dst, **(rx_kw or {}))
    served = Served(rx)
    sent = sluice.send(str(src), rx.url, **send_kw)
    return sent, served.join()


def test_defaults_keep_links_and_xattrs(src, dst):
    transfer(src, dst)
    got = dst / "src"
    assert os.lstat(got / "a").st_ino == os.lstat(got / "b").st_ino
    assert os.getxattr(got / "a", "user.tag") == b"kept"


def test_switches_turn_them_off(src, dst):
    sent, _ = transfer(src, dst, hard_links=False, xattrs=False)
    got = dst / "src"
    assert os.lstat(got / "a").st_ino != os.lstat(got / "b").st_ino
    assert (got / "b").read_bytes() == b"linked twice"
    assert "user.tag" not in os.listxattr(got / "a")


def test_filters_exclude_and_delete(src, dst):
    (dst / "src" / "gone").mkdir(parents=True)
    (dst / "src" / "gone" / "old").write_bytes(b"not in the source")
    sent, got = transfer(src, dst, filters=["+ keep.log"], exclude=["*.log"], delete=True)
    out = dst / "src" / "logs"
    assert (out / "keep.log").read_bytes() == b"included"
    assert not (out / "x.log").exists()
    assert not (dst / "src" / "gone").exists()
    assert "src/gone/old" in got["deleted"] and "src/gone" in got["deleted"]


def test_checksum_sends_a_file_whose_size_and_mtime_match(src, dst):
    transfer(src, dst)
    st = os.stat(src / "a")
    (dst / "src" / "a").write_bytes(b"LINKED TWICE")  # same size
    os.utime(dst / "src" / "a", ns=(st.st_atime_ns, st.st_mtime_ns))
    sent, _ = transfer(src, dst)
    assert (dst / "src" / "a").read_bytes() == b"LINKED TWICE"  # skipped unread, as rsync does
    sent, _ = transfer(src, dst, checksum=True)
    assert (dst / "src" / "a").read_bytes() == b"linked twice"


@pytest.mark.parametrize("bad", [dict(exclude="*.log"), dict(filters=[1]), dict(owner="yes"), dict(usermap=1)])
def test_bad_tree_options_are_usage_errors(src, bad):
    with pytest.raises(sluice.UsageError):
        sluice.send(str(src), "sluice://127.0.0.1:1/?token=x", **bad)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")
def test_receiver_numeric_ids(src, dst):
    os.chown(src / "logs" / "keep.log", 4321, 4322)
    transfer(src, dst, rx_kw={"numeric_ids": True})
    st = os.lstat(dst / "src" / "logs" / "keep.log")
    assert (st.st_uid, st.st_gid) == (4321, 4322)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")
def test_receiver_usermap_and_groupmap(src, dst):
    os.chown(src / "logs" / "keep.log", 4321, 4322)
    transfer(src, dst, rx_kw={"usermap": "4300-4399:bin", "groupmap": "*:3"})
    st = os.lstat(dst / "src" / "logs" / "keep.log")
    assert (st.st_uid, st.st_gid) == (2, 3)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")
def test_sender_usermap_comes_after_the_receivers(src, dst):
    os.chown(src / "logs" / "keep.log", 4321, 4322)
    transfer(src, dst, rx_kw={"groupmap": "4322:5"}, usermap="4321:bin", groupmap="*:3")
    st = os.lstat(dst / "src" / "logs" / "keep.log")
    assert (st.st_uid, st.st_gid) == (2, 5)


@pytest.mark.parametrize("bad", [dict(usermap="x:no-such-user-here"), dict(groupmap="nocolon"), dict(usermap=5)])
def test_bad_maps_are_usage_errors(dst, bad):
    with pytest.raises(sluice.UsageError):
        sluice.Receiver(str(dst), **bad)


def test_announce_window_bounds_what_the_sender_keeps_announced(tmp_path, dst):
    """announce_window reaches the library as --announce-window does: the sender never has more
    files announced and not complete than the window (files_held_peak), and 0 turns it off."""
    src = tmp_path / "many"
    src.mkdir()
    for i in range(600):
        (src / f"f{i:04d}").write_bytes(b"x" * (1 + i % 13))
    sent, _ = transfer(src, dst, announce_window=50, owner=False, group=False, xattrs=False, acls=False)
    assert sent["files"] == 600
    assert 0 < sent["files_held_peak"] <= 50
    assert sorted(os.listdir(dst / "many")) == sorted(os.listdir(src))
    (tmp_path / "again").mkdir()
    sent, _ = transfer(src, tmp_path / "again", announce_window=0, owner=False, group=False, xattrs=False, acls=False)
    assert sent["files_held_peak"] == 600  # no window: every file announced before any completes counts


@pytest.mark.parametrize("bad", [-1, True, 1.5, "16", (1 << 30) + 1])
def test_a_bad_announce_window_is_a_usage_error(src, dst, bad):
    with pytest.raises(sluice.UsageError, match="announce_window="):
        sluice.send(str(src), "sluice://127.0.0.1:9/?token=t", announce_window=bad)


def test_receiver_sums_cache(tmp_path):
    """Receiver(sums_cache=DIR): the first copy of a file of 20 blocks stores its sums there, and
    an update of it takes the old version's sums from there instead of reading it; without the
    option nothing is kept (a Receiver keeps no cache by default)."""
    import random

    src = tmp_path / "big"
    src.mkdir()
    f = src / "f.bin"
    f.write_bytes(random.Random(7).randbytes(20 << 16))  # 20 blocks of 64 KiB: the cache keeps 16 or more
    dst, cache = tmp_path / "dst", tmp_path / "cache"
    dst.mkdir()
    _, got = transfer(src, dst, rx_kw={"sums_cache": cache}, block_size="64K")
    assert got["files_sums_stored"] == 1, got
    assert len(list(cache.iterdir())) == 1
    with open(f, "r+b") as w:
        w.seek(5 << 16)
        w.write(b"changed")
    sent, got = transfer(src, dst, rx_kw={"sums_cache": str(cache)}, block_size="64K")
    assert got["files_sums_cached"] == 1 and got["files_sums_hashed"] == 0, got
    assert sent["bytes_sent"] == 1 << 16, sent
    assert (dst / "big" / "f.bin").read_bytes() == f.read_bytes()
    with open(f, "r+b") as w:
        w.write(b"again")
    _, got = transfer(src, dst, block_size="64K")
    assert got["files_sums_cached"] == 0 and got["files_sums_hashed"] == 1 and got["files_sums_stored"] == 0, got
