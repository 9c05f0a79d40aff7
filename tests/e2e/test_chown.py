"""rsync's --chown USER:GROUP (issue 17): every entry the receiver writes gets that owner and
group, given to the receiver or sent by the sender (TREE_OPTIONS bits 3 and 4 say the maps are
--chown's); it is --usermap '*:USER' --groupmap '*:GROUP', so names are the receiver's, and an
unknown one or a clash with --usermap/--groupmap is refused with the option named."""
import grp
import os
import pwd

import pytest

from conftest import run_sluice
from test_owner_names import NAMELESS, owned, refused_senders_map, send

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="changing owners needs root")
DAEMON, BIN = pwd.getpwnam("daemon").pw_uid, pwd.getpwnam("bin").pw_uid
G_DAEMON, G_BIN = grp.getgrnam("daemon").gr_gid, grp.getgrnam("bin").gr_gid


def tree(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    owned(src / "a", DAEMON, G_DAEMON, b"a")
    owned(src / "sub" / "b", NAMELESS, NAMELESS + 1, b"b")
    owned(src / "r", 0, 0, b"r")
    os.symlink("a", src / "l")
    os.lchown(src / "l", BIN, G_BIN)
    return src


def ids(root):
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_uid, st.st_gid)
    return out


def dest_dir(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    return d


@needs_root
def test_receivers_chown_sets_every_entry(tmp_path, receiver_factory):
    src = tree(tmp_path)
    dest = dest_dir(tmp_path, "dest")
    send(src, dest, receiver_factory, "--chown", "bin:daemon")
    got = ids(dest / "src")
    assert set(got) == {"a", "sub", "sub/b", "r", "l"}
    assert set(got.values()) == {(BIN, G_DAEMON)}, got


@needs_root
def test_senders_chown_of_one_part_leaves_the_other(tmp_path, receiver_factory):
    src = tree(tmp_path)
    user_only, group_only = dest_dir(tmp_path, "u"), dest_dir(tmp_path, "g")
    send(src, user_only, receiver_factory, send_args=("--chown", "daemon"))
    send(src, group_only, receiver_factory, send_args=("--chown", f":{G_BIN}"))
    u, g = ids(user_only / "src"), ids(group_only / "src")
    assert {n: v[0] for n, v in u.items()} == dict.fromkeys(u, DAEMON)
    assert u["a"][1] == G_DAEMON and u["sub/b"][1] == NAMELESS + 1 and u["r"][1] == 0
    assert {n: v[1] for n, v in g.items()} == dict.fromkeys(g, G_BIN)
    assert g["a"][0] == DAEMON and g["sub/b"][0] == NAMELESS and g["l"][0] == BIN


@pytest.mark.parametrize("args,message", [
    (["--chown", "no-such-user-here:daemon"], "--chown: 'no-such-user-here' is not a user on this host"),
    (["--chown", ":no-such-group-here"], "--chown: 'no-such-group-here' is not a group on this host"),
    (["--chown", ":"], "--chown ':' is not USER, USER:GROUP or :GROUP"),
    (["--chown", "a:b:c"], "--chown 'a:b:c' is not USER, USER:GROUP or :GROUP"),
    (["--chown", "bin", "--usermap", "daemon:bin"], "--chown 'bin' gives the user: --usermap cannot be given too"),
])
def test_bad_chown_is_refused_before_listening(tmp_path, args, message):
    r = run_sluice("recv", tmp_path, *args, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert "sluice://" not in r.stdout


@needs_root
def test_chown_of_one_part_goes_with_a_map_of_the_other(tmp_path, receiver_factory):
    # --chown USER with --groupmap is accepted (the map decides the groups), as in rsync.
    src = tree(tmp_path)
    dest = dest_dir(tmp_path, "dest")
    send(src, dest, receiver_factory, "--chown", "bin", "--groupmap", "daemon:bin")
    got = ids(dest / "src")
    assert {v[0] for v in got.values()} == {BIN}
    assert got["a"][1] == G_BIN and got["sub/b"][1] == NAMELESS + 1 and got["l"][1] == G_BIN


def test_senders_unknown_chown_name_fails_before_anything_is_written(tmp_path, receiver_factory):
    refused_senders_map(tmp_path, receiver_factory, ["--chown", "no-such-user-here:bin"],
                        "the sender's --chown: 'no-such-user-here' is not a user on this host")


def test_senders_chown_with_a_map_of_the_same_part_is_a_usage_error(tmp_path):
    r = run_sluice("send", tmp_path, "sluice://127.0.0.1:9/?token=t", "--chown", ":bin", "--groupmap", "x:y")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--chown ':bin' gives the group: --groupmap cannot be given too" in r.stderr, r.stderr
