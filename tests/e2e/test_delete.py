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
