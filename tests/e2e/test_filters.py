"""--exclude / --include / --exclude-from: rsync's rules, the subset docs/guarantees.md lists
(anchored '/', trailing '/', '*', '**', '?', classes, first match wins)."""
import json
import os

import pytest

from conftest import run_sluice


def tree(root):
    for p in ["a/x.log", "a/keep.log", "a/b/c.txt", "a/b/tmp/t1", "tmp/t2", "build/out.o", "src/build/gen.c",
              "src/main.c", "src/main.h", "n1", "n2", "na", "notes.md"]:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_bytes(p.encode())
    return root


def sent_paths(tmp_path, receiver_factory, *args):
    src = tree(tmp_path / "src")
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url, "--json", *args)
    rc, out, err = rx.wait()
    assert sent.returncode == 0, sent.stderr
    assert rc == 0, err
    got = set()
    for dirpath, dirnames, filenames in os.walk(dest / "src"):
        got |= {os.path.relpath(os.path.join(dirpath, n), dest / "src") for n in filenames}
    return got


ALL = {"a/x.log", "a/keep.log", "a/b/c.txt", "a/b/tmp/t1", "tmp/t2", "build/out.o", "src/build/gen.c", "src/main.c",
       "src/main.h", "n1", "n2", "na", "notes.md"}

CASES = [
    (["--exclude", "*.log"], ALL - {"a/x.log", "a/keep.log"}),
    # First match wins: the include before the exclude keeps keep.log.
    (["--include", "keep.log", "--exclude", "*.log"], ALL - {"a/x.log"}),
    (["--exclude", "*.log", "--include", "keep.log"], ALL - {"a/x.log", "a/keep.log"}),
    # Unanchored: any directory called tmp, at any depth; the trailing '/' only matches directories.
    (["--exclude", "tmp/"], ALL - {"a/b/tmp/t1", "tmp/t2"}),
    # Anchored at the start of the path in the transfer (which starts with the source's name).
    (["--exclude", "/src/build/"], ALL - {"build/out.o"}),
    # Unanchored with a '/': the path from any component on (the root's name is a component).
    (["--exclude", "src/build"], ALL - {"build/out.o", "src/build/gen.c"}),
    (["--exclude", "/src/src/build"], ALL - {"src/build/gen.c"}),
    (["--exclude", "/src/src/*.[ch]"], ALL - {"src/main.c", "src/main.h"}),
    (["--exclude", "n?"], ALL - {"n1", "n2", "na"}),
    (["--exclude", "n[0-9]"], ALL - {"n1", "n2"}),
    (["--exclude", "n[!0-9]"], ALL - {"na"}),
    (["--exclude", "a/**/t*"], ALL - {"a/b/tmp/t1"}),
    (["--exclude", "a/*/t1"], ALL),  # '*' never crosses a '/'
]


@pytest.mark.parametrize("args,expected", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_filter_rules(tmp_path, receiver_factory, args, expected):
    assert sent_paths(tmp_path, receiver_factory, *args) == expected


def test_exclude_from_file(tmp_path, receiver_factory):
    rules = tmp_path / "rules"
    rules.write_text("# comment\n; another\n\n+ keep.log\n- *.log\ntmp/\n")
    assert sent_paths(tmp_path, receiver_factory, "--exclude-from", rules) == ALL - {"a/x.log", "a/b/tmp/t1", "tmp/t2"}


def test_unreadable_exclude_from_is_a_usage_error(tmp_path):
    (tmp_path / "src").mkdir()
    r = run_sluice("send", tmp_path / "src", "sluice://127.0.0.1:1/?token=x", "--exclude-from", tmp_path / "missing")
    assert r.returncode != 0 and "cannot read filter file" in r.stderr and "missing" in r.stderr


def test_excluded_entries_are_listed_with_verbose(tmp_path, receiver_factory):
    src = tree(tmp_path / "src")
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url, "-v", "--exclude", "tmp/")
    assert sent.returncode == 0, sent.stderr
    assert "excluded by a filter: 'src/tmp/'" in sent.stderr
    assert rx.wait()[0] == 0
