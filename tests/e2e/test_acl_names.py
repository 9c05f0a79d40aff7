"""Named-user and named-group ACL entries by name (issue 17, docs/protocol.md "Owner names"):
the ids in ACL_USER / ACL_GROUP entries are named in OWNER_NAMES like file owners and mapped
on the receiver with the same rules: --usermap/--groupmap first, then the local id of the
sender's name, else the number; --numeric-ids keeps numbers. The rewritten ACL is stored in
the kernel's order, so a dry run of the result lists nothing."""
import grp
import os
import pwd
import struct
import subprocess

import pytest

import sluice_wire as w
from conftest import SLUICE, run_sluice
from test_dry_run import DryRunPeer, settle
from test_owner_names import NAMELESS, send
from test_tree_meta import fake_transfer

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="owners and ACLs of other users need root")
DAEMON, BIN = pwd.getpwnam("daemon").pw_uid, pwd.getpwnam("bin").pw_uid
G_DAEMON, G_BIN = grp.getgrnam("daemon").gr_gid, grp.getgrnam("bin").gr_gid
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 1, 2, 4, 8, 0x10, 0x20
ACCESS = "system.posix_acl_access"
UNDEF = 0xFFFFFFFF


def acl(entries):
    """The kernel's posix_acl_xattr value of (tag, perm, id) entries."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)


def named(path):
    """The named-user and named-group entries of path's access ACL: {(tag, id): perm}."""
    v = os.getxattr(path, ACCESS, follow_symlinks=False)
    out = {}
    for at in range(4, len(v), 8):
        t, p, i = struct.unpack_from("<HHI", v, at)
        if t in (USER, GROUP):
            out[(t, i)] = p
    return out


def base(*extra):
    return [(USER_OBJ, 6, UNDEF), *extra, (GROUP_OBJ, 4, UNDEF), (MASK, 7, UNDEF), (OTHER, 4, UNDEF)]


def with_acl(path, spec, content=b"x"):
    path.write_bytes(content)
    if subprocess.run(["setfacl", "-m", spec, str(path)], capture_output=True).returncode != 0:
        pytest.skip("no ACLs on this file system")


def model_acl_transfer(tmp_path, receiver_factory, *recv_args):
    """The Python sender sends file f whose ACL names its user 4243 ("daemon" there) and its
    group 4244 ("bin" there), and user 4245 without a name; returns f's named entries here."""
    with pytest.raises(KeyError):
        pwd.getpwuid(NAMELESS + 2)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, *recv_args)
    value = acl([(USER_OBJ, 6, UNDEF), (USER, 4, NAMELESS + 2), (USER, 6, NAMELESS), (GROUP_OBJ, 4, UNDEF),
                 (GROUP, 2, NAMELESS + 1), (MASK, 6, UNDEF), (OTHER, 4, UNDEF)])
    meta = w.entry_meta(uid=0, gid=0, xattrs=[(ACCESS.encode(), value)])
    names = w.owner_names([(w.OWNER_USER, NAMELESS, b"daemon"), (w.OWNER_GROUP, NAMELESS + 1, b"bin")])
    assert fake_transfer(rx.port, [(0, w.FILE, "f", 0, "", meta)], before=[names]) is None
    rc, _, err = rx.wait()
    assert rc == 0, err
    return named(dest / "f")


@needs_root
def test_acl_ids_map_by_the_senders_names(tmp_path, receiver_factory):
    assert model_acl_transfer(tmp_path, receiver_factory) == {(USER, DAEMON): 6, (USER, NAMELESS + 2): 4,
                                                              (GROUP, G_BIN): 2}


@needs_root
def test_numeric_ids_keep_acl_ids_as_numbers(tmp_path, receiver_factory):
    assert model_acl_transfer(tmp_path, receiver_factory, "--numeric-ids") == {
        (USER, NAMELESS): 6, (USER, NAMELESS + 2): 4, (GROUP, NAMELESS + 1): 2}


@needs_root
def test_maps_decide_acl_ids_before_names(tmp_path, receiver_factory):
    # daemon:7 by name; the nameless 4245 by its number; the group by the empty-name-free wildcard.
    got = model_acl_transfer(tmp_path, receiver_factory, "--usermap", f"daemon:7,{NAMELESS + 2}:bin",
                             "--groupmap", "b*:daemon")
    assert got == {(USER, 7): 6, (USER, BIN): 4, (GROUP, G_DAEMON): 2}


@needs_root
def test_the_sender_names_acl_ids_before_the_page(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with_acl(src / "f", "u:daemon:r,g:bin:rw", b"")  # empty: the recording peer asks for no data
    os.chown(src / "f", 0, 0)  # the owner is id 0, never named: only the ACL's ids are
    peer = DryRunPeer()
    try:
        r = subprocess.run([SLUICE, "send", "--dry-run", "--streams", "1", str(src),
                            f"sluice://127.0.0.1:{peer.port}/?token=testtoken"], capture_output=True, text=True,
                           timeout=300)
    finally:
        peer.close()
    assert r.returncode == 0, r.stderr
    kinds = [t for t, _ in peer.frames if t in (w.OWNER_NAMES, w.MANIFEST)]
    assert kinds.index(w.OWNER_NAMES) < kinds.index(w.MANIFEST)
    named_ids = {(k, i): n for t, p in peer.frames if t == w.OWNER_NAMES for k, i, n in w.parse_owner_names(p)}
    assert named_ids == {(w.OWNER_USER, DAEMON): b"daemon", (w.OWNER_GROUP, G_BIN): b"bin"}


@needs_root
def test_a_real_transfer_maps_acl_entries_and_merges_ids_that_meet(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    with_acl(src / "one", "u:daemon:r,g:bin:w")
    with_acl(src / "two", "u:daemon:r,u:bin:w")
    settle(src)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--usermap", "daemon:bin", "--groupmap", "bin:daemon")
    sent = run_sluice("send", src, rx.url)
    rc, _, err = rx.wait()
    assert sent.returncode == 0 and rc == 0, (sent.stderr, err)
    assert named(dest / "src" / "one") == {(USER, BIN): 4, (GROUP, G_DAEMON): 2}
    # daemon and bin are both bin here: one entry with both permissions, and said once.
    assert named(dest / "src" / "two") == {(USER, BIN): 6}
    assert "warning: separate ACL entries not kept for 1 entry (first: 'src/two'" in err, err
    # Unmapped, the copy is the source's; a dry run then finds nothing to change.
    plain = tmp_path / "plain"
    plain.mkdir()
    send(src, plain, receiver_factory)
    assert named(plain / "src" / "two") == {(USER, DAEMON): 4, (USER, BIN): 2}
    rx = receiver_factory(plain)
    r = run_sluice("send", "--dry-run", src, rx.url)
    assert rx.wait()[0] == 0 and r.returncode == 0 and r.stdout == "", r.stdout
