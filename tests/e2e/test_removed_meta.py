"""Attributes and ACLs removed on the source are removed on the receiver's entries it keeps in
place (issue 17; docs/protocol.md "Exact attributes"), as rsync -AX does: only where the
sender says its lists are complete (the receiver offers ServerHello bit 8, the sender sets the
TREE_OPTIONS kExact* flags), so --no-xattrs and an older receiver leave them alone."""
import json
import os
import shutil

import pytest

import sluice_wire as w
from conftest import run_sluice
from test_tree_meta_feature import HelloRewritingProxy, via

ROOT = os.geteuid() == 0
HAS_SETFACL = shutil.which("setfacl") is not None


def send(src, dest, receiver_factory, *send_args, proxy_bits=0):
    rx = receiver_factory(dest, "-v")
    proxy = HelloRewritingProxy(rx.port, proxy_bits) if proxy_bits else None
    try:
        url = via(rx.url, proxy.port) if proxy else rx.url
        sent = run_sluice("send", src, url, "--json", "-v", *send_args)
        rc, out, err = rx.wait()
    finally:
        if proxy:
            proxy.close()
    assert sent.returncode == 0, sent.stderr
    assert rc == 0, err
    return json.loads(sent.stdout.splitlines()[-1]), sent.stderr, err


def copied_file(tmp_path, receiver_factory):
    """A source holding one file, sent once: (src, dest)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"same")
    dest = tmp_path / "dest"
    dest.mkdir()
    send(src, dest, receiver_factory)
    return src, dest


def acl_tree(tmp_path):
    src = tmp_path / "src"
    (src / "dir").mkdir(parents=True)
    (src / "dir" / "file").write_bytes(b"unchanged content")
    (src / "plain").write_bytes(b"p")
    assert os.system(f"setfacl -m u:4242:rw '{src / 'dir' / 'file'}' && "
                     f"setfacl -m u:4243:rx -d -m g:777:rx '{src / 'dir'}'") == 0
    return src


@pytest.mark.skipif(not HAS_SETFACL, reason="setfacl (the acl package) is not installed")
def test_setfacl_b_on_the_source_removes_the_receivers_acls(tmp_path, receiver_factory):
    src = acl_tree(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    send(src, dest, receiver_factory)
    got = dest / "src"
    for p in (got / "dir" / "file", got / "dir"):
        assert "system.posix_acl_access" in os.listxattr(p), p
    assert "system.posix_acl_default" in os.listxattr(got / "dir")
    ino = os.lstat(got / "dir" / "file").st_ino
    assert os.system(f"setfacl -b '{src / 'dir' / 'file'}' && setfacl -b '{src / 'dir'}'") == 0
    s, _, _ = send(src, dest, receiver_factory)
    assert s["bytes_sent"] == 0  # the file passed the quick check: kept in place
    assert os.lstat(got / "dir" / "file").st_ino == ino
    for p in (got / "dir" / "file", got / "dir"):
        names = os.listxattr(p)
        assert "system.posix_acl_access" not in names and "system.posix_acl_default" not in names, (p, names)
        assert os.lstat(p).st_mode == os.lstat(src / p.relative_to(got)).st_mode, p  # the mask gone from the group bits


def test_setfattr_x_removes_a_user_attribute_and_keeps_the_others(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    f = src / "f"
    f.write_bytes(b"same")
    os.setxattr(f, "user.keep", b"1")
    os.setxattr(f, "user.gone", b"2")
    os.setxattr(src, "user.dir", b"3")
    dest = tmp_path / "dest"
    dest.mkdir()
    send(src, dest, receiver_factory)
    got = dest / "src"
    assert {"user.keep", "user.gone"} <= set(os.listxattr(got / "f"))
    os.removexattr(f, "user.gone")
    os.removexattr(src, "user.dir")
    s, _, rx_err = send(src, dest, receiver_factory)
    assert s["bytes_sent"] == 0
    assert "user.gone" not in os.listxattr(got / "f")
    assert os.getxattr(got / "f", "user.keep") == b"1"
    assert "user.dir" not in os.listxattr(got)
    assert "exact attribute lists" in rx_err, rx_err


def test_no_xattrs_leaves_the_receivers_attributes_alone(tmp_path, receiver_factory):
    src, dest = copied_file(tmp_path, receiver_factory)
    os.setxattr(dest / "src" / "f", "user.receivers", b"own")
    os.setxattr(dest / "src", "user.receivers", b"own")
    send(src, dest, receiver_factory, "--no-xattrs")
    assert os.getxattr(dest / "src" / "f", "user.receivers") == b"own"
    assert os.getxattr(dest / "src", "user.receivers") == b"own"


def test_a_receiver_without_bit_8_keeps_todays_behaviour_and_v_says_so(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"same")
    os.setxattr(src / "f", "user.gone", b"2")
    dest = tmp_path / "dest"
    dest.mkdir()
    send(src, dest, receiver_factory)
    os.removexattr(src / "f", "user.gone")
    _, sender_err, rx_err = send(src, dest, receiver_factory, proxy_bits=w.FEATURE_EXACT_META)
    assert os.getxattr(dest / "src" / "f", "user.gone") == b"2"  # an older receiver: not removed
    assert "does not offer hello feature bit 8" in sender_err, sender_err
    assert "not removed here" in rx_err, rx_err


@pytest.mark.skipif(not ROOT, reason="trusted. attributes need root")
def test_attributes_sluice_does_not_carry_are_never_removed(tmp_path, receiver_factory):
    src, dest = copied_file(tmp_path, receiver_factory)
    got = dest / "src" / "f"
    os.setxattr(got, "trusted.gone", b"t")
    try:
        os.setxattr(got, "security.other", b"s")  # a namespace sluice carries but never removes
        other = True
    except OSError:
        other = False
    send(src, dest, receiver_factory)
    assert "trusted.gone" not in os.listxattr(got)  # a root sender's list covers trusted.
    if other:
        assert os.getxattr(got, "security.other") == b"s"


def dry_run(src, dest, receiver_factory, *args):
    rx = receiver_factory(dest)
    r = run_sluice("send", "--dry-run", *args, src, rx.url)
    assert rx.wait()[0] == 0 and r.returncode == 0, r.stderr
    return r


def listing(tree):
    """Every entry's attribute names (ACLs included), not following symlinks."""
    out = {}
    for dirpath, dirs, files in os.walk(tree):
        for n in [""] + dirs + files:
            p = os.path.join(dirpath, n) if n else dirpath
            out[os.path.relpath(p, tree)] = sorted(os.listxattr(p, follow_symlinks=False))
    return out


@pytest.mark.skipif(not HAS_SETFACL, reason="setfacl (the acl package) is not installed")
def test_dry_run_lists_the_removals_the_real_run_makes(tmp_path, receiver_factory):
    """--dry-run lists an entry kept in place whose ACL or attribute the real run removes (rsync's
    'a' and 'x', text and JSON "changes"), removes nothing, and lists nothing once they are gone.
    Before session 16 it listed none of them (docs/guarantees.md said so)."""
    src = acl_tree(tmp_path)
    os.setxattr(src / "plain", "user.gone", b"2")
    os.setxattr(src / "plain", "user.keep", b"1")
    dest = tmp_path / "dest"
    dest.mkdir()
    send(src, dest, receiver_factory)
    assert dry_run(src, dest, receiver_factory).stdout == ""
    assert os.system(f"setfacl -b '{src / 'dir' / 'file'}' && setfacl -k '{src / 'dir'}'") == 0
    os.removexattr(src / "plain", "user.gone")
    before = listing(dest)
    r = dry_run(src, dest, receiver_factory)
    items = {line[12:]: line[:11] for line in r.stdout.splitlines()}
    assert set(items) == {"src/dir", "src/dir/file", "src/plain"}, r.stdout
    assert items["src/dir"][9] == "a" and items["src/dir/file"][9] == "a", r.stdout
    assert items["src/plain"][10] == "x" and items["src/plain"][9] == ".", r.stdout
    got = json.loads(dry_run(src, dest, receiver_factory, "--json").stdout)
    assert {c["path"]: c["item"] for c in got["changes"]} == items
    assert listing(dest) == before  # nothing removed by the dry runs
    send(src, dest, receiver_factory)
    assert "user.gone" not in os.listxattr(dest / "src" / "plain")
    assert "system.posix_acl_default" not in os.listxattr(dest / "src" / "dir")
    assert dry_run(src, dest, receiver_factory).stdout == ""


def test_dry_run_with_no_xattrs_lists_no_removal(tmp_path, receiver_factory):
    """--no-xattrs: the real run removes nothing (the lists are not complete), so the dry run
    lists nothing either."""
    src, dest = copied_file(tmp_path, receiver_factory)
    os.setxattr(dest / "src" / "f", "user.receivers", b"own")
    assert dry_run(src, dest, receiver_factory, "--no-xattrs").stdout == ""
    assert dry_run(src, dest, receiver_factory).stdout.splitlines() == [".f........x src/f"]
