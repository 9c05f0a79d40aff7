"""--delete where the receiver has a non-empty directory and the source now has a file,
symlink, directory symlink, fifo or hard link under that name (issue 17, session 16, h17p), as
rsync --delete replaces it: the new entry is made under its temporary name, the directory is
moved aside, the entry renamed into place, then the directory removed (never through a symlink)
and listed as deleted; a transfer cut before the entry is complete leaves the directory whole; a
protected entry inside refuses the replacement naming it, before anything is removed; without
--delete a file is still refused; --dry-run --delete lists the same and refuses the same. Split
from test_tree_changes.py (its helpers are shared)."""
import json
import os
import shutil

import pytest

from conftest import run_sluice
from test_tree_changes import big_, dirlink_, fifo_, file_, send, shape, symlink_


def hardlink_(p):
    os.link(p.parent / "other", p)


REPLACING = [file_, big_, symlink_, dirlink_, fifo_, hardlink_]


def old_dir(src):
    (src / "x" / "sub").mkdir(parents=True)
    (src / "x" / "sub" / "f").write_bytes(b"f")
    (src / "x" / "link").symlink_to("../other")  # removed as itself, never followed
    (src / "other").write_bytes(b"other")


def sent_then_replaced(tmp_path, receiver_factory, after, *args):
    """old_dir sent once (with args), then the source's x replaced by after: (src, dest)."""
    src, dest = tmp_path / "t", tmp_path / "dest"
    old_dir(src)
    sent, rc, err = send(src, dest, receiver_factory, *args)
    assert sent.returncode == 0 and rc == 0, err
    shutil.rmtree(src / "x")
    after(src / "x")
    return src, dest


@pytest.mark.parametrize("after", REPLACING, ids=[a.__name__.rstrip("_") for a in REPLACING])
def test_with_delete_a_non_empty_directory_gives_way_to_what_the_source_has_there(tmp_path, receiver_factory, after):
    """rsync --delete's behaviour (a directory replaced by a file, or by a symlink as /lib by
    usr/lib): the new entry is made under its temporary name, the directory moved aside, the
    entry renamed into place, then the directory removed, its paths listed as deleted. Before
    session 16 a file was refused here (exit 6) even with --delete."""
    src, dest = sent_then_replaced(tmp_path, receiver_factory, after, "--delete")
    rx = receiver_factory(dest, "-v")
    sent = run_sluice("send", src, rx.url, "--delete")
    rc, out, err = rx.wait()
    assert sent.returncode == 0 and rc == 0, sent.stderr + err
    assert shape(dest / "t") == shape(src)
    assert json.loads(out.splitlines()[-1])["deleted"] == ["t/x/link", "t/x/sub/f", "t/x/sub", "t/x"]
    assert "deleted 't/x/sub/f'" in err
    assert (dest / "t" / "other").read_bytes() == b"other"  # the removed symlink's target stays
    assert not [n for n in os.listdir(dest / "t") if n.startswith(".sluice-part.")]


@pytest.mark.parametrize("kind,after", [("file", big_), ("symlink", symlink_)])
def test_with_delete_a_directory_holding_a_protected_file_is_refused_and_kept_whole(tmp_path, receiver_factory, kind, after):
    """What the filters protect keeps its directory (rsync: "cannot delete non-empty
    directory"): refused naming the protected path, before anything in the directory is
    removed (a symlink's sweep used to empty the rest of it first)."""
    src, dest = tmp_path / "t", tmp_path / "dest"
    (src / "x" / "sub").mkdir(parents=True)
    (src / "x" / "f").write_bytes(b"f")
    sent, rc, err = send(src, dest, receiver_factory, "--delete")
    assert sent.returncode == 0 and rc == 0, err
    (dest / "t" / "x" / "sub" / "mine.keep").write_bytes(b"the receiver's")
    shutil.rmtree(src / "x")
    after(src / "x")
    sent, rc, err = send(src, dest, receiver_factory, "--delete", "--exclude", "*.keep")
    assert rc == 6 and sent.returncode != 0
    assert "cannot replace directory 't/x' with what the source has there: 't/x/sub/mine.keep' inside it is protected" in err
    assert sorted(os.listdir(dest / "t" / "x")) == ["f", "sub"]
    assert (dest / "t" / "x" / "sub" / "mine.keep").read_bytes() == b"the receiver's"
    assert not [n for n in os.listdir(dest / "t") if n.startswith(".sluice-part.")]


def test_with_delete_a_cut_transfer_leaves_the_directory_a_file_would_replace(tmp_path, receiver_factory):
    """Nothing of the old directory goes before the file is complete and verified: a transfer
    cut in the middle of the file leaves the directory whole (exit 4); the next run replaces it."""
    from conftest import free_port
    from corrupting_proxy import CorruptingProxy
    from test_resume import start_recv

    src, dest = tmp_path / "t", tmp_path / "dest"
    old_dir(src)
    sent, rc, err = send(src, dest, receiver_factory, "--delete")
    assert sent.returncode == 0 and rc == 0, err
    before = shape(dest / "t")
    shutil.rmtree(src / "x")
    (src / "x").write_bytes(os.urandom(24 << 20))
    port = free_port()
    rx = start_recv(dest, port)
    proxy = CorruptingProxy(port, at=(5 << 20) + 12345, cut=True)  # inside a block of x's data
    try:
        cut = run_sluice("send", src, "--to", f"127.0.0.1:{proxy.port}", "--token", "resume", "--delete",
                         "--block-size", "1M", "--streams", "2", "--retry-for", "0")  # no reopen (test_reconnect.py)
        _, err = rx.proc.communicate(timeout=120)
    finally:
        proxy.close()
    assert proxy.flipped and cut.returncode != 0 and rx.proc.returncode == 4, (cut.stderr, err)
    # The file's partial temporary and its journal stay for a resume (test_resume.py).
    after = {k: v for k, v in shape(dest / "t").items() if k != "." and not k.startswith(".sluice-part.")}
    assert after == {k: v for k, v in before.items() if k != "."}
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url, "--delete")
    rc, out, err = rx.wait()
    assert sent.returncode == 0 and rc == 0, sent.stderr + err
    assert shape(dest / "t") == shape(src)
    assert not [n for n in os.listdir(dest / "t") if n.startswith(".sluice-part.")]


def test_without_delete_a_file_in_place_of_a_non_empty_directory_is_still_refused(tmp_path, receiver_factory):
    src, dest = sent_then_replaced(tmp_path, receiver_factory, file_)
    sent, rc, err = send(src, dest, receiver_factory)
    assert rc == 6 and sent.returncode != 0
    assert "cannot put file 't/x' in place: the receiver has a directory there that is not empty" in err
    assert (dest / "t" / "x" / "sub" / "f").read_bytes() == b"f"


def test_dry_run_with_delete_lists_the_directory_a_file_would_replace(tmp_path, receiver_factory):
    """--dry-run --delete lists the old directory's paths as the real run deletes them, changes
    nothing, and refuses (exit 6, naming it) where the real run would, for a protected entry."""
    src, dest = sent_then_replaced(tmp_path, receiver_factory, file_, "--delete")
    before = shape(dest / "t")
    rx = receiver_factory(dest)
    r = run_sluice("send", "--dry-run", "--delete", src, rx.url)
    assert r.returncode == 0 and rx.wait()[0] == 0, r.stderr
    assert r.stdout.splitlines() == [".d..t...... t", ">f+++++++++ t/x", "*deleting   t/x/link", "*deleting   t/x/sub/f",
                                     "*deleting   t/x/sub/", "*deleting   t/x/"], r.stdout
    assert shape(dest / "t") == before
    (dest / "t" / "x" / "mine.keep").write_bytes(b"the receiver's")
    rx = receiver_factory(dest)
    r = run_sluice("send", "--dry-run", "--delete", "--exclude", "*.keep", src, rx.url)
    rc, _, err = rx.wait()
    assert rc == 6 and r.returncode != 0
    assert "'t/x/mine.keep' inside it is protected" in err
