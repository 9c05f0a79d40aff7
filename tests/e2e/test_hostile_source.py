"""Sources that change or are not what they look like (issue 14): a file truncated while it
is sent (logrotate's copytruncate), a receiver's temporary file truncated while it is
verified, mtimes before 1970, symlinks, pipes and pseudo-files named on the command line,
a tree that contains the receiver's DIR, and `a/lnk/..`.

Truncation happens at a known point, not after a sleep: an LD_PRELOAD shim
(tests/shim/truncate_shim.c) truncates the file when the process first maps or reads it at
or beyond a given offset, which is where a block's checksum starts."""
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import SLUICE, run_sluice, tree_digest, write_random

SHIM = os.environ.get("SLUICE_TRUNCATE_SHIM",
                      str(Path(SLUICE).resolve().parents[1] / "tests" / "shim" / "libsluice-test-truncate-shim.so"))
MIB = 1 << 20


def shim_env(match, at, to, when="before"):
    env = dict(os.environ)
    env.update(LD_PRELOAD=SHIM, SLUICE_TEST_TRUNCATE_MATCH=str(match), SLUICE_TEST_TRUNCATE_AT=str(at),
               SLUICE_TEST_TRUNCATE_TO=str(to), SLUICE_TEST_TRUNCATE_WHEN=when)
    return env


@pytest.fixture
def rx_factory(receiver_factory):
    """`sluice recv DIR` with an optional environment (the shim)."""

    def make(dest, *args, env=None):
        return receiver_factory(dest, *args, token="t", env=env, json=False)

    return make


def assert_shim_present():
    assert os.path.exists(SHIM), f"the truncation shim was not built: {SHIM}"


# --- item 2: a source truncated while it is sent ---------------------------------------------

@pytest.mark.parametrize("send_path", ["splice", "sendfile", "read_send"])
def test_a_source_truncated_while_a_block_is_checksummed_fails_naming_it(tmp_path, rx_factory, send_path):
    """Before: the checksum read the block through a mapping, and the pages past the new end of
    file raised SIGBUS: the sender died with no message (exit -7)."""
    assert_shim_present()
    src = tmp_path / "app.log"
    write_random(src, 4 * MIB, 21)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = rx_factory(dest)
    # One stream: blocks go in order, so the block at 2 MiB is the one being checksummed when the
    # file is cut to 2.5 MiB (half of it is left).
    sent = subprocess.run([SLUICE, "send", str(src), rx.url, "--streams", "1", "--block-size", "1M",
                           "--send-path", send_path],
                          capture_output=True, text=True, timeout=120, env=shim_env(src, 2 * MIB, 2 * MIB + MIB // 2))
    assert "sluice-test-shim: truncated" in sent.stderr, sent.stderr
    assert sent.returncode == 5, (sent.returncode, sent.stderr)
    assert (f"source '{src}' shrank while being sent: expected {MIB} bytes at offset {2 * MIB}, got {MIB // 2}"
            in sent.stderr), sent.stderr
    rc, _, err = rx.wait()
    assert rc != 0
    assert not (dest / "app.log").exists()


@pytest.mark.parametrize("send_path", ["splice", "sendfile", "read_send"])
def test_a_source_truncated_after_a_blocks_checksum_fails_in_the_data_path_naming_it(tmp_path, rx_factory, send_path):
    """The checksum of the block at 2 MiB reads the whole block; the file is cut to 2.5 MiB just
    after, so the splice, sendfile or read that moves the block's data meets the end of file: a
    short count, then 0. That must end the transfer the same way, not hang or send garbage."""
    assert_shim_present()
    src = tmp_path / "app.log"
    write_random(src, 4 * MIB, 23)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = rx_factory(dest)
    sent = subprocess.run([SLUICE, "send", str(src), rx.url, "--streams", "1", "--block-size", "1M",
                           "--send-path", send_path],
                          capture_output=True, text=True, timeout=120,
                          env=shim_env(src, 3 * MIB, 2 * MIB + MIB // 2, when="after"))
    assert "sluice-test-shim: truncated" in sent.stderr, sent.stderr
    assert sent.returncode == 5, (sent.returncode, sent.stderr)
    assert (f"source '{src}' shrank while being sent: expected {MIB} bytes at offset {2 * MIB}, got {MIB // 2}"
            in sent.stderr), sent.stderr
    rc, _, err = rx.wait()
    assert rc != 0
    assert not (dest / "app.log").exists()


def test_a_receivers_temporary_file_truncated_while_it_is_verified_fails_naming_it(tmp_path, rx_factory):
    """--recv-path splice reads each block back to verify it. Before: through a mapping, so a
    local process truncating the temporary file killed the receiver with SIGBUS."""
    assert_shim_present()
    src = tmp_path / "data.bin"
    write_random(src, 4 * MIB, 22)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = rx_factory(dest, "--recv-path", "splice", env=shim_env(dest, MIB, 0))
    sent = run_sluice("send", src, rx.url, "--streams", "1", "--block-size", "1M")
    rc, _, err = rx.wait()
    assert "sluice-test-shim: truncated" in err, err
    assert rc == 6, (rc, err)
    assert f"the temporary file of 'data.bin' shrank while being received: expected {MIB} bytes at offset {MIB}" in err
    assert sent.returncode != 0
    assert not (dest / "data.bin").exists()


# --- item 9: mtimes before 1970 ----------------------------------------------------------------

def test_mtimes_before_1970_with_a_fraction_and_from_1900_arrive_exactly(tmp_path, rx_factory):
    """Before: -500000000 ns became tv_sec 0, tv_nsec -500000000 and futimens failed the whole
    transfer ("cannot set the mtime ... Invalid argument"). tmpfs keeps 1900 (ext4 clamps
    anything before 1901-12-13), so the 1900 dates are tested where the file system holds them."""
    base = Path(tempfile.mkdtemp(dir="/dev/shm")) if os.path.isdir("/dev/shm") else tmp_path
    try:
        src = base / "restored"
        (src / "sub").mkdir(parents=True)
        times = {
            "half-second-before-1970": -500_000_000,           # 1969-12-31 23:59:59.5
            "just-before-a-second": -1_000_000_001,
            "just-after-a-second": -999_999_999,
            "a-second-exactly": -1_000_000_000,
            "1900": -2_208_988_800_000_000_000 + 250_000_000,  # 1900-01-01 00:00:00.25
            "sub/old-too": -1_500_000_000,
        }
        for name, ns in times.items():
            (src / name).write_bytes(name.encode() * 1000)
            os.utime(src / name, ns=(ns, ns))
        os.symlink("1900", src / "old-link")
        os.utime(src / "old-link", ns=(-2_500_000_000, -2_500_000_000), follow_symlinks=False)
        os.utime(src / "sub", ns=(-123_456_789, -123_456_789))
        os.utime(src, ns=(-3_000_000_001, -3_000_000_001))
        dest = base / "dest"
        dest.mkdir()
        rx = rx_factory(dest)
        sent = run_sluice("send", src, rx.url, "--streams", "2")
        rc, _, err = rx.wait()
        assert sent.returncode == 0, sent.stderr
        assert rc == 0, err
        assert tree_digest(dest / "restored") == tree_digest(src)
        assert (dest / "restored").stat().st_mtime_ns == -3_000_000_001
        assert (dest / "restored" / "1900").stat().st_mtime_ns == times["1900"]
        # The same commands again: a resume's quick check (size and mtime) finds every file
        # complete, so nothing is sent again (an inexact mtime would send them all).
        rx = rx_factory(dest)
        again = run_sluice("send", src, rx.url, "--json")
        rc, _, err = rx.wait()
        assert again.returncode == 0 and rc == 0, (again.stderr, err)
        stats = json.loads(again.stdout.strip().splitlines()[-1])
        assert stats["bytes_sent"] == 0 and stats["bytes_skipped"] == stats["bytes"] > 0, stats
    finally:
        if base != tmp_path:
            subprocess.run(["rm", "-rf", str(base)], check=False)


# --- item 10: what a command-line operand really is ---------------------------------------------

def test_a_symlink_named_as_a_source_is_followed_under_its_own_name(tmp_path, rx_factory):
    """Before: `sluice send LINK` sent the symlink itself (a dangling one at the receiver)."""
    (tmp_path / "real.bin").write_bytes(b"the data" * 1000)
    (tmp_path / "realdir").mkdir()
    (tmp_path / "realdir" / "f").write_bytes(b"f")
    os.symlink("realdir/f", tmp_path / "realdir" / "inner-link")
    os.symlink(tmp_path / "real.bin", tmp_path / "lnk")
    os.symlink("realdir", tmp_path / "dirlnk")
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = rx_factory(dest)
    sent = run_sluice("send", tmp_path / "lnk", tmp_path / "dirlnk", rx.url)
    rc, _, err = rx.wait()
    assert sent.returncode == 0 and rc == 0, (sent.stderr, err)
    assert not (dest / "lnk").is_symlink()
    assert (dest / "lnk").read_bytes() == b"the data" * 1000
    assert (dest / "dirlnk").is_dir() and not (dest / "dirlnk").is_symlink()
    assert (dest / "dirlnk" / "f").read_bytes() == b"f"
    assert os.readlink(dest / "dirlnk" / "inner-link") == "realdir/f"  # inside a tree: still a symlink


@pytest.mark.parametrize("how", ["process-substitution", "dev-stdin", "proc-self-fd"])
def test_a_pipe_named_as_a_source_is_refused_with_the_pipe_mode_hint(tmp_path, rx_factory, how):
    """Before: exit 0, and the receiver got a symlink named after the fd ("63" -> "pipe:[...]")."""
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = rx_factory(dest)
    if how == "process-substitution":
        p = subprocess.run(["bash", "-c", f'"$0" send <(echo produced) "$1"', SLUICE, rx.url],
                           capture_output=True, text=True, timeout=60)
    elif how == "dev-stdin":
        p = subprocess.run([SLUICE, "send", "/dev/stdin", rx.url], input="produced", capture_output=True, text=True,
                           timeout=60)
    else:
        r, w = os.pipe()
        os.write(w, b"produced")
        os.close(w)
        try:
            p = subprocess.run([SLUICE, "send", f"/proc/self/fd/{r}", rx.url], pass_fds=(r,), capture_output=True,
                               text=True, timeout=60)
        finally:
            os.close(r)
    assert p.returncode == 5, (p.returncode, p.stderr)
    assert "is a pipe or fifo, not a file or directory" in p.stderr
    assert "sluice send - URL" in p.stderr
    rx.kill()
    assert list(dest.iterdir()) == []


def test_a_pseudo_file_is_refused_not_sent_as_zero_bytes(tmp_path, rx_factory):
    """Before: /proc/cpuinfo (size 0, yet it has data) arrived as an empty file, exit 0."""
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = rx_factory(dest)
    p = run_sluice("send", "/proc/cpuinfo", rx.url)
    assert p.returncode == 5, (p.returncode, p.stderr)
    assert "source '/proc/cpuinfo' is a pseudo-file (procfs)" in p.stderr
    rx.kill()
    assert not (dest / "cpuinfo").exists()


# --- also seen: the receiver's DIR inside the sent tree, and `a/lnk/..` ---------------------------

def test_a_tree_containing_the_receivers_dir_skips_it(tmp_path, rx_factory):
    """Before: the sender walked into the receiver's DIR and sent back what it was receiving
    (src/in/src/in/...), and the receiver's temporary files with it."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a").write_bytes(b"a" * 5000)
    (src / "sub" / "b").write_bytes(b"b" * 70000)
    inbox = src / "in"
    inbox.mkdir()
    rx = rx_factory(inbox)
    sent = run_sluice("send", src, rx.url)
    rc, _, err = rx.wait()
    assert sent.returncode == 0 and rc == 0, (sent.stderr, err)
    assert f"skipping '{inbox}': a sluice receiver is receiving into it" in sent.stderr
    got = sorted(str(p.relative_to(inbox)) for p in inbox.rglob("*"))
    assert got == ["src", "src/a", "src/sub", "src/sub/b"]

    # The receiver's DIR itself as the source: refused before connecting.
    rx2 = rx_factory(inbox)
    p = run_sluice("send", inbox, rx2.url)
    assert p.returncode == 5
    assert "is the directory a sluice receiver is receiving into" in p.stderr


def test_a_path_ending_in_dotdot_is_named_after_the_directory_it_reads(tmp_path, rx_factory):
    """Before: `a/lnk/..` was named `a` (from the text) while the kernel read lnk's target's parent."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "c").mkdir(parents=True)
    (tmp_path / "b" / "in-b").write_bytes(b"from b")
    os.symlink("../b/c", tmp_path / "a" / "lnk")
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = rx_factory(dest)
    sent = run_sluice("send", f"{tmp_path}/a/lnk/..", rx.url)
    rc, _, err = rx.wait()
    assert sent.returncode == 0 and rc == 0, (sent.stderr, err)
    assert (dest / "b" / "in-b").read_bytes() == b"from b"
    assert not (dest / "a").exists()
