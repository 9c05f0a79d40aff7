"""Updates of a tree whose entries changed kind or were removed, checked against the source as
rsync -aHAXS leaves them (issue 17, h17n): an entry the source now has as a directory replaces
the file, symlink or fifo the receiver has under that name; an empty directory gives way to a
file, a symlink or a special file; a non-empty one is refused naming it, before the file is
sent and with nothing left beside it (with --delete it gives way: test_dir_replace.py); --delete leaves each directory with the sender's mtime,
not the time the receiver removed something from it; another name of an updated file keeps what
it had; a receiver that is not root updates read-only directories; and a source path longer than
a transfer may carry is refused by the sender, naming it."""
import json
import os
import shutil
import stat

import pytest

from conftest import run_sluice


def send(src, dest, receiver_factory, *args):
    dest.mkdir(exist_ok=True)
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url, *args)
    rc, _, err = rx.wait()
    return sent, rc, err


def shape(root):
    """Per relative path: kind, mode, mtime (ns), content or target; the directory itself too."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in [""] + dirnames + filenames:
            p = os.path.join(dirpath, n) if n else dirpath
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            kind = stat.S_IFMT(st.st_mode)
            what = (os.readlink(p) if stat.S_ISLNK(st.st_mode) else
                    open(p, "rb").read() if stat.S_ISREG(st.st_mode) else None)
            out[rel] = (kind, stat.S_IMODE(st.st_mode) if not stat.S_ISLNK(st.st_mode) else None, st.st_mtime_ns, what)
    return out


def file_(p, data=b"file"):
    p.write_bytes(data)


def dir_(p):
    p.mkdir()
    (p / "in").write_bytes(b"inside")


def symlink_(p):
    os.symlink("elsewhere", p)


def dirlink_(p):
    (p.parent / "target-dir").mkdir(exist_ok=True)
    os.symlink("target-dir", p)


def fifo_(p):
    os.mkfifo(p)


def empty_dir_(p):
    p.mkdir()


def big_(p):
    p.write_bytes(os.urandom(3 << 20))  # several blocks: the path through a temporary file


CHANGES = [  # (before, after): every one arrives as the source has it, exit 0
    (file_, dir_), (big_, dir_), (symlink_, dir_), (dirlink_, dir_), (fifo_, dir_),
    (empty_dir_, file_), (empty_dir_, big_), (empty_dir_, symlink_), (empty_dir_, fifo_),
    (symlink_, file_), (file_, symlink_), (fifo_, file_), (file_, fifo_),
]


@pytest.mark.parametrize("before,after", CHANGES, ids=[f"{a.__name__.rstrip('_')}-to-{b.__name__.rstrip('_')}" for a, b in CHANGES])
@pytest.mark.parametrize("delete", [False, True], ids=["update", "delete"])
def test_an_entry_that_changed_kind_is_replaced(tmp_path, receiver_factory, before, after, delete):
    src, dest = tmp_path / "t", tmp_path / "dest"
    src.mkdir()
    (src / "other").write_bytes(b"other")
    before(src / "x")
    args = ["--delete"] if delete else []
    sent, rc, err = send(src, dest, receiver_factory, *args)
    assert sent.returncode == 0 and rc == 0, sent.stderr + err
    if os.path.lexists(src / "x"):
        shutil.rmtree(src / "x") if (src / "x").is_dir() and not (src / "x").is_symlink() else os.unlink(src / "x")
    after(src / "x")
    sent, rc, err = send(src, dest, receiver_factory, *args)
    assert sent.returncode == 0 and rc == 0, sent.stderr + err
    got, want = shape(dest / "t"), shape(src)
    if not delete:  # without --delete what the source no longer has stays (the old dir's files cannot)
        got = {k: v for k, v in got.items() if k in want or k == "."}
        got["."], want["."] = got["."][:2], want["."][:2]  # kept extras leave the directory's mtime alone
    assert got == want


@pytest.mark.parametrize("kind,after", [("file", big_), ("symlink", symlink_)])
def test_a_non_empty_directory_in_the_way_is_refused_naming_it_with_nothing_left(tmp_path, receiver_factory, kind, after):
    """A file is refused when it is registered, before its data is sent; a symlink when the
    symlinks are made, whose temporary used to be left beside the directory."""
    src, dest = tmp_path / "t", tmp_path / "dest"
    (src / "x").mkdir(parents=True)
    (src / "x" / "kept").write_bytes(b"receiver's")
    sent, rc, err = send(src, dest, receiver_factory)
    assert sent.returncode == 0 and rc == 0, err
    shutil.rmtree(src / "x")
    after(src / "x")
    sent, rc, err = send(src, dest, receiver_factory)
    assert rc == 6 and sent.returncode != 0
    assert f"cannot put {kind} 't/x' in place: the receiver has a directory there that is not empty" in err
    assert (dest / "t" / "x" / "kept").read_bytes() == b"receiver's"
    assert sorted(os.listdir(dest / "t")) == ["x"]  # no .sluice-part.* beside it


def test_delete_leaves_the_directories_with_the_senders_mtimes(tmp_path, receiver_factory):
    src, dest = tmp_path / "t", tmp_path / "dest"
    (src / "d" / "sub").mkdir(parents=True)
    for n in ("a", "b"):
        (src / "d" / n).write_bytes(n.encode())
    (src / "d" / "sub" / "c").write_bytes(b"c")
    sent, rc, err = send(src, dest, receiver_factory, "--delete")
    assert sent.returncode == 0 and rc == 0, err
    os.unlink(src / "d" / "b")
    shutil.rmtree(src / "d" / "sub")
    os.chmod(src / "d", 0o555)  # a mode without u+w is set after the removal, not before
    for p, t in ((src / "d", 1_000_000_000_123_456_789), (src, -86_400_000_000_001)):
        os.utime(p, ns=(t, t))
    try:
        sent, rc, err = send(src, dest, receiver_factory, "--delete")
        assert sent.returncode == 0 and rc == 0, err
        assert shape(dest / "t") == shape(src)
    finally:
        os.chmod(src / "d", 0o755)
        if (dest / "t" / "d").exists():
            os.chmod(dest / "t" / "d", 0o755)


@pytest.mark.parametrize("change", ["mtime", "mode", "content"])
def test_a_file_with_another_name_on_the_receiver_is_replaced_not_changed_in_place(tmp_path, receiver_factory, change):
    """The other name (outside what is sent) keeps its content, mode and mtime, as rsync leaves
    it; an update of the same content used to set the new mode and mtime on the shared inode."""
    src, dest = tmp_path / "t", tmp_path / "dest"
    src.mkdir()
    (src / "f").write_bytes(os.urandom(3 << 20))  # more than 1 MiB: the update path, not a whole send
    sent, rc, err = send(src, dest, receiver_factory)
    assert sent.returncode == 0 and rc == 0, err
    other = dest / "other name"
    os.link(dest / "t" / "f", other)
    before = os.lstat(other)
    old_bytes = other.read_bytes()
    if change == "mtime":
        os.utime(src / "f", ns=(7, 1_234_567_890_123_456_789))
    elif change == "mode":
        os.chmod(src / "f", 0o600)
        os.utime(src / "f", ns=(7, 1_234_567_890_123_456_789))
    else:
        with open(src / "f", "r+b") as f:
            f.seek(2 << 20)
            f.write(b"changed")
    sent, rc, err = send(src, dest, receiver_factory)
    assert sent.returncode == 0 and rc == 0, err
    assert shape(dest / "t") == shape(src)
    after = os.lstat(other)
    assert (after.st_mtime_ns, after.st_mode, after.st_nlink) == (before.st_mtime_ns, before.st_mode, 1)
    assert other.read_bytes() == old_bytes


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="runs the receiver as nobody: needs root and setpriv")
def test_a_receiver_that_is_not_root_updates_directories_the_sender_keeps_read_only(receiver_factory):
    """Root writes into a 0555 directory anyway; another user could not, and an update of a tree
    with one (left so by the first run) failed with 'cannot create ...: Permission denied'."""
    import tempfile
    import subprocess

    from conftest import SLUICE, free_port

    base = tempfile.mkdtemp(prefix="sluice-e2e-nonroot-")  # under /tmp (1777): nobody can reach it
    try:
        src, dest = os.path.join(base, "t"), os.path.join(base, "dest")
        os.makedirs(os.path.join(src, "ro", "sub"))
        os.makedirs(dest)
        for p, data in (("ro/f", b"a"), ("ro/sub/g", b"b"), ("ro/gone", b"c")):
            with open(os.path.join(src, p), "wb") as f:
                f.write(data)
        for p in (base, src, os.path.join(src, "ro"), os.path.join(src, "ro", "sub")):
            os.chmod(p, 0o755)
        os.chown(dest, 65534, 65534)

        def transfer():
            for d in ("ro/sub", "ro"):
                os.chmod(os.path.join(src, d), 0o555)
            port = free_port()
            rx = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", SLUICE, "recv", dest,
                                   "--bind", "127.0.0.1", "--port", str(port), "--token", "t", "--no-sums-cache"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                assert rx.stdout.readline().startswith("sluice://")
                sent = run_sluice("send", src, f"sluice://127.0.0.1:{port}?token=t", "--delete", "--no-owner", "--no-group")
                _, err = rx.communicate(timeout=120)
            finally:
                if rx.poll() is None:
                    rx.kill()
                    rx.communicate()
            for d in ("ro", "ro/sub"):
                os.chmod(os.path.join(src, d), 0o755)
            return sent, rx.returncode, err

        sent, rc, err = transfer()
        assert sent.returncode == 0 and rc == 0, sent.stderr + err
        with open(os.path.join(src, "ro", "f"), "wb") as f:
            f.write(b"changed")
        with open(os.path.join(src, "ro", "sub", "new"), "wb") as f:
            f.write(b"new")
        os.unlink(os.path.join(src, "ro", "gone"))
        sent, rc, err = transfer()
        assert sent.returncode == 0 and rc == 0, sent.stderr + err
        for d in ("ro", "ro/sub"):
            os.chmod(os.path.join(src, d), 0o555)
        assert shape(os.path.join(dest, "t")) == shape(src)
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", base])
        shutil.rmtree(base, ignore_errors=True)


def test_a_source_path_longer_than_a_transfer_may_carry_is_refused_naming_it(tmp_path, receiver_factory):
    """A tree deeper than PATH_MAX (made through directory fds) used to reach the receiver, which
    refused it as 'MANIFEST: entry 17 path too long', naming neither the path nor the limit; rsync
    skips such a name with 'filename overflows max-path len'."""
    src, dest = tmp_path / "long", tmp_path / "dest"
    src.mkdir()
    fd = os.open(src, os.O_RDONLY)
    try:
        for i in range(17):  # 17 x 253 bytes: past 4095 at the 17th level
            name = "%02d" % i + "d" * 250
            os.mkdir(name, dir_fd=fd)
            sub = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = sub
        f = os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.close(f)
    finally:
        os.close(fd)
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url)
    assert sent.returncode == 5, sent.stderr
    assert "cannot send '" + str(src) + "/00ddd" in sent.stderr
    assert "bytes long, more than the 4095 a path may have" in sent.stderr
    assert not [f for _, _, fs in os.walk(dest) for f in fs]  # refused while listing: no file arrived


def test_a_source_named_like_a_receivers_temporary_file_is_refused_unless_excluded(tmp_path, receiver_factory):
    """Found by h17n: a tree holding an unfinished transfer's '.sluice-part.<hash>' files (kept for
    resume) sent on: the receiver took the entry for another file's leftover temporary and
    removed it ('cannot open ... to set its owner and attributes', exit 6, the file gone)."""
    src, dest = tmp_path / "t", tmp_path / "dest"
    src.mkdir()
    (src / "a").write_bytes(os.urandom(3 << 20))
    name = ".sluice-part.8c8a06a09565e3c6"  # the receiver's temporary name of 't/a': XXH3-64 of the path
    (src / name).write_bytes(b"a real file with an unlucky name")
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url)
    assert sent.returncode == 5, sent.stderr
    assert f"cannot send '{src / name}': its name has the form of a sluice receiver's temporary file" in sent.stderr
    assert "--exclude '.sluice-part.*'" in sent.stderr
    rx.kill()
    sent, rc, err = send(src, dest, receiver_factory, "--exclude", ".sluice-part.*")
    assert sent.returncode == 0 and rc == 0, sent.stderr + err
    assert sorted(os.listdir(dest / "t")) == ["a"]


def test_a_sender_naming_an_entry_like_a_temporary_file_is_refused(tmp_path, receiver_factory):
    import sluice_wire as w
    from test_bad_input import hostile_manifest

    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    ftype, _ = hostile_manifest(rx, [(0, w.FILE, "d/.sluice-part.0123456789abcdef", 10, "")])
    assert ftype == w.ABORT
    rc, out, err = rx.wait()
    assert rc == 7 and "has the form of the receiver's temporary names" in err
    assert list(dest.iterdir()) == []
