"""Trees as rsync -aHAX keeps them (issue 17): hard links sent once and linked, owners (by name
or number), extended attributes, ACLs, file capabilities, set-id bits and special files kept,
and a hostile sender's metadata refused with a message naming the entry and the rule."""
import base64
import json
import os
import shutil
import socket
import stat
import struct

import pytest

import sluice_wire as w
from conftest import run_sluice, write_random

ROOT = os.geteuid() == 0
# cap_net_raw+ep as the kernel stores it (VFS_CAP_REVISION_2)
CAP_NET_RAW = base64.b64decode("AQAAAgAgAAAAAAAAAAAAAAAAAAA=")


def send_tree(src, dest, receiver_factory, *send_args, recv_args=()):
    rx = receiver_factory(dest, *recv_args)
    sent = run_sluice("send", src, rx.url, "--json", *send_args)
    rc, out, err = rx.wait()
    assert sent.returncode == 0, sent.stderr
    assert rc == 0, err
    return json.loads(sent.stdout.splitlines()[-1]), json.loads(out.splitlines()[-1]), err


def inode_groups(root):
    """Relative paths grouped by inode: the shape of a tree's hard links."""
    groups = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                groups.setdefault(st.st_ino, []).append(os.path.relpath(p, root))
    return sorted(sorted(g) for g in groups.values())


def test_hard_links_are_sent_once_and_linked(tmp_path, receiver_factory):
    src = tmp_path / "src"
    (src / "a" / "deep").mkdir(parents=True)
    (src / "b").mkdir()
    write_random(src / "a" / "big", 3 << 20, 1)
    os.link(src / "a" / "big", src / "b" / "big again")
    os.link(src / "a" / "big", src / "a" / "deep" / "third")
    (src / "small").write_bytes(b"s" * 1000)
    os.link(src / "small", src / "small2")
    (src / "alone").write_bytes(b"x" * 10)
    dest = tmp_path / "dest"
    dest.mkdir()
    s, r, _ = send_tree(src, dest, receiver_factory)
    assert inode_groups(dest / "src") == inode_groups(src)
    assert os.stat(dest / "src" / "a" / "big").st_nlink == 3
    assert (dest / "src" / "b" / "big again").read_bytes() == (src / "a" / "big").read_bytes()
    # One copy of each inode's data went over the wire.
    one_copy = (3 << 20) + 1000 + 10
    assert s["bytes_sent"] == r["bytes_sent"] == one_copy


def test_no_hard_links_sends_every_name(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"y" * 5000)
    os.link(src / "f", src / "g")
    dest = tmp_path / "dest"
    dest.mkdir()
    s, r, _ = send_tree(src, dest, receiver_factory, "--no-hard-links")
    assert os.stat(dest / "src" / "f").st_ino != os.stat(dest / "src" / "g").st_ino
    assert r["bytes_sent"] == 10000


def test_hard_link_whose_first_name_is_excluded_is_sent_as_a_file(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.tmp").write_bytes(b"z" * 100)
    os.link(src / "a.tmp", src / "b")
    dest = tmp_path / "dest"
    dest.mkdir()
    send_tree(src, dest, receiver_factory, "--exclude", "*.tmp")
    assert not (dest / "src" / "a.tmp").exists()
    assert (dest / "src" / "b").read_bytes() == b"z" * 100


@pytest.mark.skipif(not ROOT, reason="owners, trusted. attributes and devices need root on both sides")
def test_owners_xattrs_acls_capabilities_and_specials_are_kept(tmp_path, receiver_factory):
    src = tmp_path / "src"
    (src / "dir").mkdir(parents=True)
    f = src / "dir" / "file"
    f.write_bytes(b"data")
    os.chown(f, 12345, 23456)  # ids with no user or group on this host
    os.setxattr(f, "user.note", b"hello\x00binary")
    os.setxattr(f, "trusted.t", b"tv")
    tool = src / "tool"
    tool.write_bytes(b"#!/bin/sh\n")
    os.chmod(tool, 0o4755)
    os.setxattr(tool, "security.capability", CAP_NET_RAW)
    os.chmod(src / "dir", 0o1777)
    os.mkfifo(src / "fifo", 0o640)
    os.mknod(src / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    with socket.socket(socket.AF_UNIX) as sk:
        sk.bind(str(src / "sock"))
    if shutil.which("setfacl"):
        assert os.system(f"setfacl -m u:4242:rw '{f}' && setfacl -d -m g:777:rx '{src / 'dir'}'") == 0
    os.utime(f, ns=(0, -300_000_000_123_456_789))  # 1960, with nanoseconds
    dest = tmp_path / "dest"
    dest.mkdir()
    _, _, err = send_tree(src, dest, receiver_factory)
    assert "not kept" not in err, err
    d = dest / "src"
    st = os.lstat(d / "dir" / "file")
    assert (st.st_uid, st.st_gid) == (12345, 23456)
    assert st.st_mtime_ns == -300_000_000_123_456_789
    for name in ("user.note", "trusted.t") + (("system.posix_acl_access",) if shutil.which("setfacl") else ()):
        assert os.getxattr(d / "dir" / "file", name) == os.getxattr(f, name), name
    if shutil.which("setfacl"):
        assert os.getxattr(d / "dir", "system.posix_acl_default") == os.getxattr(src / "dir", "system.posix_acl_default")
    assert os.getxattr(d / "tool", "security.capability") == CAP_NET_RAW
    assert stat.S_IMODE(os.lstat(d / "tool").st_mode) == 0o4755
    assert stat.S_IMODE(os.lstat(d / "dir").st_mode) == 0o1777
    assert stat.S_ISFIFO(os.lstat(d / "fifo").st_mode) and stat.S_IMODE(os.lstat(d / "fifo").st_mode) == 0o640
    assert stat.S_ISCHR(os.lstat(d / "null").st_mode) and os.lstat(d / "null").st_rdev == os.makedev(1, 3)
    assert stat.S_ISSOCK(os.lstat(d / "sock").st_mode)


@pytest.mark.skipif(not ROOT, reason="changing owners needs root")
def test_no_owner_and_no_xattrs_leave_them_out(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"1")
    os.chown(src / "f", 12345, 23456)
    os.setxattr(src / "f", "user.k", b"v")
    os.chmod(src / "f", 0o4755)
    dest = tmp_path / "dest"
    dest.mkdir()
    _, _, err = send_tree(src, dest, receiver_factory, "--no-owner", "--no-xattrs", "--no-specials")
    st = os.lstat(dest / "src" / "f")
    assert st.st_uid == 0 and st.st_gid == 23456
    assert "user.k" not in os.listxattr(dest / "src" / "f")
    # The setuid bit of a file whose owner was not kept is dropped, and said.
    assert stat.S_IMODE(st.st_mode) == 0o755
    assert "set-id bits not kept for 1 entry" in err, err


@pytest.mark.skipif(not ROOT, reason="changing owners needs root")
def test_metadata_of_unchanged_files_is_updated_on_a_second_send(tmp_path, receiver_factory):
    """The receiver skips owner, group and mode a quick-checked file already has (no work per
    unchanged file); what changed at the source without touching size or mtime still lands."""
    src = tmp_path / "src"
    src.mkdir()
    for n in "abcd":
        (src / n).write_bytes(n.encode() * 100)
    os.chmod(src / "d", 0o4755)
    dest = tmp_path / "dest"
    dest.mkdir()
    send_tree(src, dest, receiver_factory)
    os.chmod(src / "a", 0o600)                 # mode only: size and mtime as before
    os.chown(src / "b", 54321, 54322)          # owner only
    os.setxattr(src / "c", "user.k", b"v")     # an attribute only
    s, r, _ = send_tree(src, dest, receiver_factory)
    assert s["bytes_sent"] == 0 and r["bytes_skipped"] == 400  # every file passed the quick check
    got = {n: os.lstat(dest / "src" / n) for n in "abcd"}
    assert stat.S_IMODE(got["a"].st_mode) == 0o600
    assert (got["b"].st_uid, got["b"].st_gid) == (54321, 54322)
    assert os.getxattr(dest / "src" / "c", "user.k") == b"v"
    assert stat.S_IMODE(got["d"].st_mode) == 0o4755  # kept, set-id bit included
    for n in "abcd":
        assert stat.S_IMODE(got[n].st_mode) == stat.S_IMODE(os.lstat(src / n).st_mode)


@pytest.mark.skipif(not ROOT, reason="trusted. attributes need root (the kernel refuses user. ones on symlinks)")
def linked_tree(tmp_path, value):
    """src/target and src/link -> target, the link itself carrying trusted.l = value (a test
    using it is skipped where the file system keeps no attributes on symlinks)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "target").write_bytes(b"t")
    os.symlink("target", src / "link")
    try:
        os.setxattr(src / "link", "trusted.l", value, follow_symlinks=False)
    except OSError as e:
        pytest.skip(f"this file system keeps no trusted. attributes on symlinks: {e}")
    return src


def test_attributes_of_symlinks_are_kept_without_following_them(tmp_path, receiver_factory):
    """lsetxattr on the link's name in its confined directory: the link gets the attribute,
    its target does not, on the first send and again on a second one (links are made anew)."""
    src = linked_tree(tmp_path, b"on the link")
    dest = tmp_path / "dest"
    dest.mkdir()
    for _ in range(2):
        _, _, err = send_tree(src, dest, receiver_factory, recv_args=("-v",))
        assert "attributes of symlinks" not in err, err
        assert os.getxattr(dest / "src" / "link", "trusted.l", follow_symlinks=False) == b"on the link"
        assert "trusted.l" not in os.listxattr(dest / "src" / "target")


def fake_transfer(port, entries, before=()):
    """A whole transfer of metadata-only entries (no data) from the Python sender, `before`
    frames ahead of its page; returns the ABORT message if the receiver refused, else None."""
    tid = os.urandom(16)
    c, status = w.handshake("127.0.0.1", port, "testtoken", 0, 0, 1, tid, features=w.FEATURE_TREE_META)
    assert status == 0
    for f in before:
        c.sendall(f)
    c.sendall(w.manifest_meta(0, entries))
    ftype, payload = w.read_frame(c)
    if ftype == w.ABORT:
        n = struct.unpack_from("<II", payload)[1]
        return payload[8:8 + n].decode()
    assert ftype == w.MANIFEST_ACK
    c.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, len(entries), 0)))
    d, _ = w.handshake("127.0.0.1", port, "testtoken", 1, 1, 1, tid)
    d.sendall(w.frame(w.STREAM_END, struct.pack("<QQ", 0, 0)))
    while (f := w.read_frame(c))[0] != w.ALL_VERIFIED:
        assert f[0] != w.ABORT, f
    c.sendall(w.frame(w.TRANSFER_END, struct.pack("<IIQQ", 1, 0, 0, 0)))
    ftype, payload = w.read_frame(c)
    assert ftype == w.FINAL_STATUS, ftype
    return None


@pytest.mark.skipif(not ROOT, reason="changing owners needs root")
@pytest.mark.parametrize("numeric", [False, True])
def test_owners_map_by_name_unless_numeric_ids(tmp_path, receiver_factory, numeric):
    # The sender's uid 4243 is called "root" there: kept as this host's root by name (as rsync
    # does when the hosts disagree), or as 4243 with --numeric-ids.
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, *(["--numeric-ids"] if numeric else []))
    meta = w.entry_meta(uid=4243, gid=4244, user=b"root", group=b"root")
    assert fake_transfer(rx.port, [(0, w.FILE, "f", 0, "", meta)]) is None
    rc, out, err = rx.wait()
    assert rc == 0, err
    st = os.lstat(dest / "f")
    assert (st.st_uid, st.st_gid) == ((4243, 4244) if numeric else (0, 0))


ACL_OK = struct.pack("<IHHI", 2, 1, 6, 0xFFFFFFFF)
HOSTILE = [
    ("unknown kind", [(0, 10, "x", 0, "", None)], "unknown kind 10"),
    ("unknown entry flag", None, "unknown flags"),
    ("xattr name too long", [(0, w.FILE, "f", 0, "", w.entry_meta(xattrs=[(b"user." + b"n" * 300, b"v")]))],
     "extended attribute name of 305 bytes"),
    ("xattr value too long", [(0, w.FILE, "f", 0, "", w.entry_meta(xattrs=[(b"user.n", b"v" * 70000)]))],
     "more than 65536"),
    ("too many xattrs", [(0, w.FILE, "f", 0, "", w.entry_meta(xattrs=[(b"user.%d" % i, b"") for i in range(129)]))],
     "129 extended attributes, more than the limit of 128"),
    ("too many xattr bytes", [(0, w.FILE, "f", 0, "", w.entry_meta(xattrs=[(b"user.%d" % i, b"v" * 60000) for i in range(5)]))],
     "more than 256 KiB of extended attributes"),
    ("xattr outside the namespaces", [(0, w.FILE, "f", 0, "", w.entry_meta(xattrs=[(b"system.nfs4_acl", b"")]))],
     "outside the user., trusted., security. namespaces"),
    ("same xattr twice", [(0, w.FILE, "f", 0, "", w.entry_meta(xattrs=[(b"user.a", b""), (b"user.a", b"")]))],
     "lists attribute 'user.a' twice"),
    ("ACL of another version", [(0, w.FILE, "f", 0, "", w.entry_meta(xattrs=[(b"system.posix_acl_access", struct.pack("<I", 3))]))],
     "unknown ACL version"),
    ("ACL with a bad tag", [(0, w.FILE, "f", 0, "", w.entry_meta(xattrs=[(b"system.posix_acl_access", ACL_OK + struct.pack("<HHI", 0x40, 7, 0))]))],
     "unknown tag 64"),
    ("ACL too long", [(0, w.FILE, "f", 0, "", w.entry_meta(xattrs=[(b"system.posix_acl_access", struct.pack("<I", 2) + b"\x01\x00\x06\x00\x00\x00\x00\x00" * 1025)]))],
     "1025 ACL entries exceed the limit"),
    ("owner name with NUL", [(0, w.FILE, "f", 0, "", w.entry_meta(user=b"ro\x00ot"))], "owner name with a NUL"),
    ("hard link to a later entry", [(0, w.HARD_LINK, "l", 0, "f", w.entry_meta(rdev=1)), (1, w.FILE, "f", 0, "", None)],
     "not an earlier entry"),
    ("hard link to a directory", [(0, w.DIR, "d", 0, "", None), (1, w.HARD_LINK, "l", 0, "d", w.entry_meta(rdev=0))],
     "does not name a regular file sent earlier"),
    ("hard link naming another path", [(0, w.FILE, "f", 0, "", None), (1, w.HARD_LINK, "l", 0, "etc/passwd", w.entry_meta(rdev=0))],
     "does not name a regular file sent earlier"),
    ("hard link outside the transfer", [(0, w.FILE, "f", 0, "", None), (1, w.HARD_LINK, "l", 0, "../f", w.entry_meta(rdev=0))],
     "'..' component"),
    ("hard link without its target id", [(0, w.FILE, "f", 0, "", None), (1, w.HARD_LINK, "l", 0, "f", None)],
     "lacks its metadata"),
    ("device without its number", [(0, w.CHAR_DEVICE, "c", 0, "", None)], "lacks its metadata"),
    ("device number on a file", [(0, w.FILE, "f", 0, "", w.entry_meta(rdev=5))], "not a device but has a device number"),
    ("special file with a size", [(0, w.FIFO, "p", 10, "", None)], "is not a file but has a size"),
]


@pytest.mark.parametrize("name,entries,message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_metadata_is_refused(tmp_path, receiver_factory, name, entries, message):
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    tid = os.urandom(16)
    c, status = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, 1, tid, features=w.FEATURE_TREE_META)
    assert status == 0
    if entries is None:  # a flag bit nobody owns
        body = struct.pack("<II", 0, 1) + struct.pack("<QQqIBBHHH", 0, 0, 0, 0o644, w.FILE, 0x80, 1, 0, 0) + b"f"
        c.sendall(w.frame(w.MANIFEST, body))
    else:
        c.sendall(w.manifest_meta(0, entries))
    rc, out, err = rx.wait(timeout=60)
    assert rc != 0
    assert message in err, err
    # Nothing of the refused entry, nothing outside DIR (what came before it stays, as in any
    # failed transfer: directories and empty files, complete as they are).
    assert set(os.listdir(dest)) <= {"d", "f"}
    assert not os.path.lexists(tmp_path / "f") and not os.path.lexists(tmp_path / "etc")


def test_every_files_metadata_arrives_when_the_announce_window_is_full(tmp_path, receiver_factory):
    """A full announce window sends the page before the file that waits for room: that file's
    attributes (read just before) must go with it in the next page, not with the one sent."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(300):
        (src / f"f{i:03d}").write_bytes(b"x" * (1 + i % 7))
        os.setxattr(src / f"f{i:03d}", "user.n", str(i).encode())
    dest = tmp_path / "dest"
    dest.mkdir()
    send_tree(src, dest, receiver_factory, "--announce-window", "8")
    lost = [i for i in range(300) if "user.n" not in os.listxattr(dest / "src" / f"f{i:03d}")]
    assert lost == []
    assert all(os.getxattr(dest / "src" / f"f{i:03d}", "user.n") == str(i).encode() for i in range(300))
