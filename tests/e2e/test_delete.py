"""--delete: the receiver removes what it has under the sent directories that the source no
longer holds, lists it (-v, JSON "deleted"), keeps what the filters exclude, and never reaches
outside DIR or through a symlink."""
import json
import os

from conftest import run_sluice


def test_delete_removes_extraneous_entries_and_lists_them(tmp_path, receiver_factory):
    src = tmp_path / "src"
    (src / "keep").mkdir(parents=True)
    (src / "keep" / "f").write_bytes(b"f")
    (src / "g").write_bytes(b"g")
    dest = tmp_path / "dest"
    old = dest / "src"
    (old / "gone" / "deeper").mkdir(parents=True)
    (old / "gone" / "deeper" / "x").write_bytes(b"x")
    (old / "keep").mkdir()
    (old / "keep" / "stale").write_bytes(b"s")
    (old / "cache.tmp").write_bytes(b"excluded: left alone")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"p")
    os.symlink(outside, old / "link to outside")
    (dest / "not sent").write_bytes(b"outside the sent roots")
    rx = receiver_factory(dest, "-v")
    sent = run_sluice("send", src, rx.url, "--delete", "--exclude", "*.tmp")
    assert sent.returncode == 0, sent.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    deleted = json.loads(out.splitlines()[-1])["deleted"]
    assert sorted(deleted) == sorted(["src/gone/deeper/x", "src/gone/deeper", "src/gone", "src/keep/stale",
                                      "src/link to outside"])
    assert deleted.index("src/gone/deeper/x") < deleted.index("src/gone")
    for d in deleted:
        assert f"deleted '{d}'" in err
    assert sorted(os.listdir(old)) == ["cache.tmp", "g", "keep"]
    assert os.listdir(old / "keep") == ["f"]
    assert (outside / "precious").read_bytes() == b"p"  # the symlink went, not what it points at
    assert (dest / "not sent").exists()


def test_without_delete_nothing_is_removed(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a")
    dest = tmp_path / "dest"
    (dest / "src").mkdir(parents=True)
    (dest / "src" / "old").write_bytes(b"o")
    rx = receiver_factory(dest)
    assert run_sluice("send", src, rx.url).returncode == 0
    rc, out, err = rx.wait()
    assert rc == 0, err
    assert json.loads(out.splitlines()[-1])["deleted"] == []
    assert (dest / "src" / "old").exists()


def test_delete_keeps_what_the_filters_protect_inside_a_directory_the_source_no_longer_has(tmp_path, receiver_factory):
    """rsync's rule, found missing by h17n beside rsync -aHAXS --delete --exclude: the filters
    protect an excluded file at any depth, so a directory the source removed keeps it (and
    itself, with only the protected entries left); sluice removed the whole directory. The dry
    run lists what the transfer removes, no more."""
    src = tmp_path / "src"
    (src / "gone" / "sub").mkdir(parents=True)
    (src / "gone" / "f").write_bytes(b"f")
    (src / "kept").write_bytes(b"k")
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    assert run_sluice("send", src, rx.url).returncode == 0
    assert rx.wait()[0] == 0
    (dest / "src" / "gone" / "notes.keep").write_bytes(b"the receiver's own")
    (dest / "src" / "gone" / "sub" / "deeper.keep").write_bytes(b"the receiver's too")
    (dest / "src" / "gone" / "sub" / "other").write_bytes(b"not protected")
    import shutil
    shutil.rmtree(src / "gone")
    args = ["--delete", "--exclude", "*.keep"]
    rx = receiver_factory(dest)
    dry = run_sluice("send", src, rx.url, "--dry-run", *args)
    assert dry.returncode == 0, dry.stderr
    assert rx.wait()[0] == 0
    listed = sorted(l.split(None, 1)[1] for l in dry.stdout.splitlines() if l.startswith("*deleting"))
    assert listed == ["src/gone/f", "src/gone/sub/other"]
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url, *args)
    assert sent.returncode == 0, sent.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    assert sorted(json.loads(out.splitlines()[-1])["deleted"]) == ["src/gone/f", "src/gone/sub/other"]
    assert (dest / "src" / "gone" / "notes.keep").read_bytes() == b"the receiver's own"
    assert (dest / "src" / "gone" / "sub" / "deeper.keep").read_bytes() == b"the receiver's too"
    assert sorted(os.listdir(dest / "src" / "gone")) == ["notes.keep", "sub"]
