"""What a pusher may store in `sluice serve DIR --port P --allow-upload` (issue 15, h15o): the
token lets a client write files, not act as the server's root. By default a push is stored as
the server's own user and group, without set-uid/set-gid bits, file capabilities, security.* or
trusted.* attributes or ACLs naming someone, and the pusher, the server's log and /_stats say
what was dropped; --push-keep-owners keeps owners (still no privileges); --push-keep-privileges
keeps everything a root `sluice recv` keeps. The server runs as root here (as the tests do):
before h15o it stored the setuid-root binary and the capability as sent."""
import base64
import contextlib
import json
import os
import shutil
import stat
import urllib.request

import pytest

from conftest import run_sluice
from serve_client import Server

TOKEN = "testtoken"
ROOT = os.geteuid() == 0
CAP_NET_RAW = base64.b64decode("AQAAAgAgAAAAAAAAAAAAAAAAAAA=")  # security.capability: cap_net_raw+ep
ACLS = shutil.which("setfacl") is not None

pytestmark = pytest.mark.skipif(not ROOT, reason="owners, setuid-root files and trusted. attributes need root")


def hostile_tree(root):
    """What a pusher holding only the token could use to become root on the server."""
    root.mkdir(parents=True)
    suid = root / "rootshell"
    suid.write_bytes(b"#!/bin/sh\nid\n")
    os.chown(suid, 0, 0)
    os.chmod(suid, 0o6755)  # set-uid and set-gid root
    cap = root / "raw"
    cap.write_bytes(b"#!/bin/sh\n")
    os.chmod(cap, 0o755)
    os.setxattr(cap, "security.capability", CAP_NET_RAW)
    attrs = root / "attrs"
    attrs.write_bytes(b"data")
    os.setxattr(attrs, "trusted.x", b"planted")
    os.setxattr(attrs, "user.x", b"kept")
    theirs = root / "theirs"
    theirs.write_bytes(b"someone else's")
    os.chown(theirs, 1234, 1234)
    sticky = root / "sticky-file"
    sticky.write_bytes(b"s")
    os.chmod(sticky, 0o1644)
    d = root / "shared"
    d.mkdir()
    os.chown(d, 1234, 1234)
    os.chmod(d, 0o3775)  # set-gid and sticky directory
    if ACLS:
        # A named user's access ACL, and a default ACL naming no one (owner, group, other).
        assert os.system(f"setfacl -m u:4242:rw '{attrs}' && setfacl -d -m u::rwx,g::rx,o::- '{d}'") == 0
    return root


def push(server, src, *args):
    return run_sluice("send", src, server.sluice_base + f"?token={TOKEN}", "--json", *args, timeout=300)


@contextlib.contextmanager
def pushed(tmp_path, *serve_args):
    """hostile_tree pushed into a serve with serve_args: yields (server, the push's result,
    the source, the stored tree); the server is killed after."""
    src = hostile_tree(tmp_path / "src" / "h")
    served = tmp_path / "served"
    served.mkdir()
    s = Server(served, "--port", "0", "--allow-upload", *serve_args)
    try:
        r = push(s, src)
        assert r.returncode == 0, r.stderr
        yield s, r, src, served / "h"
    finally:
        s.kill()


def xattrs(p):
    return set(os.listxattr(p, follow_symlinks=False))


def stats(server):
    return json.loads(urllib.request.urlopen(server.url("/_stats"), timeout=30).read())


def test_a_push_stores_no_owners_set_id_bits_capabilities_or_trusted_attributes(tmp_path):
    with pushed(tmp_path, "-v") as (s, r, src, d):
        me = (os.geteuid(), os.getegid())
        for name in ("rootshell", "raw", "attrs", "theirs", "sticky-file", "shared"):
            got = os.lstat(d / name)
            assert (got.st_uid, got.st_gid) == me, name
            assert got.st_mode & 0o6000 == 0, (name, oct(got.st_mode))
        assert stat.S_IMODE(os.lstat(d / "rootshell").st_mode) == 0o755
        assert stat.S_IMODE(os.lstat(d / "sticky-file").st_mode) == 0o644  # sticky only on directories
        assert stat.S_IMODE(os.lstat(d / "shared").st_mode) == 0o1775
        assert "security.capability" not in xattrs(d / "raw")
        assert "trusted.x" not in xattrs(d / "attrs")
        assert os.getxattr(d / "attrs", "user.x") == b"kept"
        if ACLS:
            assert "system.posix_acl_access" not in xattrs(d / "attrs")  # names user 4242
            # An ACL naming no one (owner, group, other, mask) is kept.
            assert os.getxattr(d / "shared", "system.posix_acl_default") == os.getxattr(src / "shared", "system.posix_acl_default")
        assert "own user and group" in stats(s)["push_metadata"]
        # The pusher is told, once per kind, and so is the server's log and /_stats.
        want = ["owners not kept", "groups not kept", "set-id bits not kept", "file capabilities not kept",
                "trusted.* extended attributes not kept", "sticky bits of files not kept"]
        if ACLS:
            want.append("ACLs naming users or groups not kept")
        for w in want:
            assert sum(": warning: " + w in line for line in r.stderr.splitlines()) == 1, (w, r.stderr)
        assert "--push-keep-privileges" in r.stderr and "--push-keep-owners" in r.stderr
        kinds = {k["kind"]: k for k in stats(s)["push_metadata_not_kept"]}
        assert kinds["set-id bits"]["entries"] == 2 and kinds["set-id bits"]["first"] in ("h/rootshell", "h/shared")
        assert kinds["file capabilities"]["entries"] == 1
        assert kinds["trusted.* extended attributes"]["entries"] == 1
        assert kinds["owners"]["entries"] == 2  # theirs and shared: the root-owned ones were the server's anyway
        # A dry run of the same push finds nothing to change: it judges by what would be stored.
        dry = push(s, src, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert json.loads(dry.stdout.splitlines()[-1])["changes"] == [], dry.stdout
        rc, _, err = s.stop()
        assert rc == 0, err
        assert "push from 127.0.0.1: warning: file capabilities not kept for 1 entry" in err, err


def test_keep_owners_keeps_owners_but_no_privileges(tmp_path):
    with pushed(tmp_path, "--push-keep-owners") as (s, r, src, d):
        assert (os.lstat(d / "theirs").st_uid, os.lstat(d / "theirs").st_gid) == (1234, 1234)
        assert os.lstat(d / "shared").st_uid == 1234
        assert stat.S_IMODE(os.lstat(d / "rootshell").st_mode) == 0o755
        assert stat.S_IMODE(os.lstat(d / "shared").st_mode) == 0o1775
        assert "security.capability" not in xattrs(d / "raw")
        assert "trusted.x" not in xattrs(d / "attrs")
        assert os.getxattr(d / "attrs", "user.x") == b"kept"
        if ACLS:  # owners are trusted: an ACL naming a user is too (mapped by name as owners)
            assert os.getxattr(d / "attrs", "system.posix_acl_access") == os.getxattr(src / "attrs", "system.posix_acl_access")
        assert "owners not kept" not in r.stderr
        assert "set-id bits not kept" in r.stderr and "file capabilities not kept" in r.stderr


def test_keep_privileges_keeps_what_a_root_recv_keeps(tmp_path):
    with pushed(tmp_path, "--push-keep-privileges") as (s, r, src, d):
        assert "not kept" not in r.stderr, r.stderr
        assert os.lstat(d / "theirs").st_uid == 1234
        assert stat.S_IMODE(os.lstat(d / "rootshell").st_mode) == 0o6755
        assert os.getxattr(d / "raw", "security.capability") == CAP_NET_RAW
        assert os.getxattr(d / "attrs", "trusted.x") == b"planted"
        assert stats(s)["push_metadata_not_kept"] == []


def test_the_keep_options_need_pushes(tmp_path):
    for opt in ("--push-keep-owners", "--push-keep-privileges"):
        r = run_sluice("serve", tmp_path, "--http", "0", "--port", "0", opt, timeout=30)
        assert r.returncode != 0 and "need --port and --allow-upload" in r.stderr, r.stderr
