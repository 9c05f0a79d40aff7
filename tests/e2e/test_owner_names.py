"""Owners by name (issue 17, docs/protocol.md "Owner names"): the sender names each user and
group id once, in OWNER_NAMES before the first page that uses it; the receiver maps a name it
knows to its own id, else keeps the number; --usermap/--groupmap (rsync's FROM:TO syntax)
decide first; --numeric-ids ignores names. A hostile sender's names are bounded and refused
with a message naming the value."""
import grp
import json
import os
import pwd
import struct
import subprocess

import pytest

import sluice_wire as w
from conftest import SLUICE, run_sluice, write_random
from test_dry_run import DryRunPeer, settle
from test_tree_meta import fake_transfer

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="owning files by other users needs root")
DAEMON, BIN, NOBODY = pwd.getpwnam("daemon").pw_uid, pwd.getpwnam("bin").pw_uid, pwd.getpwnam("nobody").pw_uid
G_DAEMON, G_BIN = grp.getgrnam("daemon").gr_gid, grp.getgrnam("bin").gr_gid
NAMELESS = 4243  # an id with no name on this host (checked below)


def owned(path, uid, gid, content=b""):
    path.write_bytes(content)
    os.chown(path, uid, gid)


def trailers(payload):
    """(uid, gid, user, group) of each entry with a metadata trailer in a MANIFEST payload."""
    _, count = struct.unpack_from("<II", payload)
    at, out = 8, []
    for _ in range(count):
        _, _, _, _, _, flags, plen, tlen, _ = struct.unpack_from("<QQqIBBHHH", payload, at)
        at += 36 + plen + tlen
        assert not flags & w.ENTRY_SPARSE
        if flags & w.HAS_META:
            uid, gid, _, _, ulen, glen, _, nx = struct.unpack_from("<IIQBBBBH", payload, at)
            at += 22
            out.append((uid, gid, payload[at:at + ulen], payload[at + ulen:at + ulen + glen]))
            at += ulen + glen
            for _ in range(nx):
                nlen, vlen = struct.unpack_from("<HI", payload, at)
                at += 6 + nlen + vlen
    assert at == len(payload)
    return out


@needs_root
def test_each_id_is_named_once_before_the_first_page_that_uses_it(tmp_path):
    with pytest.raises(KeyError):
        pwd.getpwuid(NAMELESS)
    src = tmp_path / "src"
    src.mkdir()
    # 300 empty files: two pages (the first holds 64 entries); bin first appears in the second.
    for i in range(300):
        uid, gid = (DAEMON, G_DAEMON) if i < 200 else (BIN, G_BIN)
        owned(src / f"f{i:03d}", NAMELESS if i == 7 else uid, gid)
    owned(src / "zroot", 0, 0)
    peer = DryRunPeer()
    try:
        r = subprocess.run([SLUICE, "send", "--dry-run", "--streams", "1", "--no-xattrs", "--no-acls", str(src),
                            f"sluice://127.0.0.1:{peer.port}/?token=testtoken"], capture_output=True, text=True, timeout=300)
    finally:
        peer.close()
    assert r.returncode == 0, r.stderr
    named, used, pages = {}, set(), 0
    for ftype, payload in peer.frames:
        if ftype == w.OWNER_NAMES:
            for kind, i, name in w.parse_owner_names(payload):
                assert (kind, i) not in named, f"{kind} {i} named twice"
                assert (kind, i) not in used, f"{kind} {i} named after a page used it"
                named[(kind, i)] = name
        elif ftype == w.MANIFEST:
            pages += 1
            for uid, gid, user, group in trailers(payload):
                assert user == b"" and group == b"", "names travel in OWNER_NAMES, not in every entry"
                used |= {(w.OWNER_USER, uid), (w.OWNER_GROUP, gid)}
    assert pages >= 2
    # Ids without a name here, and id 0 (never mapped by name, as rsync), travel as numbers alone.
    assert named == {(w.OWNER_USER, DAEMON): b"daemon", (w.OWNER_USER, BIN): b"bin",
                     (w.OWNER_GROUP, G_DAEMON): b"daemon", (w.OWNER_GROUP, G_BIN): b"bin"}
    assert (w.OWNER_USER, NAMELESS) in used and (w.OWNER_USER, 0) in used


def send(src, dest, receiver_factory, *recv_args, send_args=()):
    rx = receiver_factory(dest, *recv_args)
    sent = run_sluice("send", src, rx.url, *send_args)
    rc, out, err = rx.wait()
    assert sent.returncode == 0, sent.stderr
    assert rc == 0, err
    return sent


def owners(root, names):
    return {n: (os.lstat(root / n).st_uid, os.lstat(root / n).st_gid) for n in names}


def owner_tree(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    owned(src / "d", DAEMON, G_DAEMON, b"d")
    owned(src / "b", BIN, G_BIN, b"b")
    owned(src / "n", NAMELESS, NAMELESS + 1, b"n")
    owned(src / "r", 0, 0, b"r")
    return src


@needs_root
def test_names_map_to_local_ids_and_maps_decide_first(tmp_path, receiver_factory):
    src = owner_tree(tmp_path)
    plain, mapped = tmp_path / "plain", tmp_path / "mapped"
    plain.mkdir()
    mapped.mkdir()
    send(src, plain, receiver_factory)
    assert owners(plain / "src", "dbnr") == {"d": (DAEMON, G_DAEMON), "b": (BIN, G_BIN), "n": (NAMELESS, NAMELESS + 1),
                                              "r": (0, 0)}
    # A name, a range and a wildcard; groups: a name, then the empty name (nameless ids and id 0).
    send(src, mapped, receiver_factory, "--usermap", "daemon:bin,4000-4999:nobody,b*:3",
         "--groupmap", f"bin:daemon,:{NAMELESS + 100}")
    assert owners(mapped / "src", "dbnr") == {"d": (BIN, G_DAEMON), "b": (3, G_DAEMON), "n": (NOBODY, NAMELESS + 100),
                                               "r": (0, NAMELESS + 100)}


@needs_root
def test_numeric_ids_leave_names_out_of_the_maps_too(tmp_path, receiver_factory):
    src = owner_tree(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    # With --numeric-ids every id is nameless: "daemon" matches nothing, "*" and numbers do.
    send(src, dest, receiver_factory, "--numeric-ids", "--usermap", f"daemon:bin,{DAEMON}:3", "--groupmap", "*:7")
    assert owners(dest / "src", "dbnr") == {"d": (3, 7), "b": (BIN, 7), "n": (NAMELESS, 7), "r": (0, 7)}


@pytest.mark.parametrize("opt,value,message", [
    ("--usermap", "daemon", "--usermap: 'daemon' is not FROM:TO"),
    ("--usermap", "daemon:", "has no TO"),
    ("--usermap", "1:no-such-user-here", "maps to 'no-such-user-here', which is not a user on this host"),
    ("--groupmap", "daemon:bin,9-3:1", "--groupmap: '9-3:1' is a range whose low end is above its high end"),
    ("--groupmap", "x:no-such-group-here", "which is not a group on this host"),
])
def test_bad_maps_are_refused_before_listening(tmp_path, opt, value, message):
    r = run_sluice("recv", tmp_path, opt, value, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert "sluice://" not in r.stdout


@needs_root
def test_dry_run_lists_owner_acl_and_xattr_changes(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    for n in ("own", "mapped", "xa", "acl", "same"):
        owned(src / n, DAEMON, G_DAEMON, n.encode())
    os.setxattr(src / "xa", "user.k", b"v1")
    if subprocess.run(["setfacl", "-m", "u:bin:r", str(src / "acl")]).returncode != 0:
        pytest.skip("no ACLs on this file system")
    settle(src)
    dest = tmp_path / "dest"
    dest.mkdir()
    send(src, dest, receiver_factory)
    d = dest / "src"
    os.chown(d / "own", BIN, G_DAEMON)
    os.chown(d / "mapped", BIN, G_DAEMON)
    os.setxattr(d / "xa", "user.k", b"v2")
    subprocess.run(["setfacl", "-b", str(d / "acl")], check=True)
    settle(d)
    before = {n: (os.lstat(d / n), os.listxattr(d / n)) for n in os.listdir(d)}
    rx = receiver_factory(dest, "--usermap", "daemon:bin")
    r = run_sluice("send", "--dry-run", src, rx.url)
    assert r.returncode == 0, r.stderr
    assert rx.wait()[0] == 0
    # Under daemon:bin, "mapped" and "own" (now bin's) are as the transfer would leave them;
    # the files still daemon's here would become bin's.
    assert set(r.stdout.splitlines()) == {".f....o..a. src/acl", ".f....o.... src/same", ".f....o...x src/xa"}, r.stdout
    assert {n: (os.lstat(d / n), os.listxattr(d / n)) for n in os.listdir(d)} == before
    # Without the map: daemon's files on the sender are daemon's here.
    rx = receiver_factory(dest)
    r = run_sluice("send", "--dry-run", src, rx.url)
    assert rx.wait()[0] == 0
    assert set(r.stdout.splitlines()) == {".f.......a. src/acl", ".f....o.... src/mapped", ".f....o.... src/own",
                                          ".f........x src/xa"}, r.stdout
    # The transfer does what the list said; then nothing is left to list.
    send(src, dest, receiver_factory)
    assert os.getxattr(d / "xa", "user.k") == b"v1" and owners(d, ["own", "mapped"]) == {"own": (DAEMON, G_DAEMON),
                                                                                         "mapped": (DAEMON, G_DAEMON)}
    rx = receiver_factory(dest)
    r = run_sluice("send", "--dry-run", src, rx.url)
    assert rx.wait()[0] == 0 and r.returncode == 0 and r.stdout == "", r.stdout


@needs_root
def test_a_resumed_transfer_names_owners_again(tmp_path):
    from conftest import free_port
    from corrupting_proxy import CorruptingProxy
    from test_resume import start_recv

    src = tmp_path / "src"
    src.mkdir()
    write_random(src / "big", 24 << 20, 5)
    os.chown(src / "big", DAEMON, G_DAEMON)
    owned(src / "small", BIN, G_BIN, b"s")
    dest = tmp_path / "dest"
    dest.mkdir()
    port = free_port()
    rx = start_recv(dest, port, "--usermap", "daemon:sys")
    proxy = CorruptingProxy(port, at=(5 << 20) + 12345, cut=True)
    try:
        cut = subprocess.run([SLUICE, "send", str(src), "--to", f"127.0.0.1:{proxy.port}", "--token", "resume",
                              "--block-size", "1M", "--streams", "2", "--retry-for", "0"],
                             capture_output=True, text=True, timeout=120)
        rx.proc.communicate(timeout=120)
    finally:
        proxy.close()
    assert cut.returncode != 0 and not (dest / "src" / "big").exists()
    rx2 = start_recv(dest, port, "--usermap", "daemon:sys")
    again = subprocess.run([SLUICE, "send", str(src), rx2.url, "--block-size", "1M", "--streams", "2", "--json"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert rx2.proc.wait(timeout=60) == 0
    assert json.loads(again.stdout.splitlines()[-1])["bytes_skipped"] > 0
    assert owners(dest / "src", ["big", "small"]) == {"big": (pwd.getpwnam("sys").pw_uid, G_DAEMON), "small": (BIN, G_BIN)}


def names_then_manifest(port, frames, entries, features=w.FEATURE_TREE_META):
    """A Python sender: the handshake, `frames`, then one page of `entries`; returns the socket."""
    c, status = w.handshake("127.0.0.1", port, "testtoken", 0, 0, 1, os.urandom(16), features=features)
    assert status == 0
    try:
        for f in frames + [w.manifest_meta(0, entries)]:
            c.sendall(f)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before the rest was sent: the test reads why from the receiver
    return c


U, G = w.OWNER_USER, w.OWNER_GROUP
FILE_OWNED = [(0, w.FILE, "f", 0, "", w.entry_meta(uid=1, gid=1))]
HOSTILE_NAMES = [
    ("too many users", [w.owner_names([(U, i, b"u%d" % i) for i in range(65537)])], "more than 65536 user ids"),
    ("name with NUL", [w.owner_names([(G, 5, b"ro\x00ot")])], "the name of group id 5 has a NUL byte"),
    ("empty name", [w.owner_names([(U, 5, b""), (U, 6, b"xyz")])], "an empty name for id 5"),
    ("unknown kind", [w.owner_names([(2, 5, b"x")])], "unknown kind 2 for id 5"),
    ("name longer than the frame", [w.frame(w.OWNER_NAMES, struct.pack("<IBBHI", 1, 0, 255, 0, 5) + b"x" * 40)],
     "truncated"),
    ("count the frame cannot hold", [w.owner_names([(U, 5, b"x")], count=0xFFFFFFFF)],
     "OWNER_NAMES: 4294967295 names announced in a frame of"),
    ("same id twice", [w.owner_names([(U, 5, b"x")]), w.owner_names([(U, 5, b"x")])], "names user id 5 twice"),
]


def refusal(tmp_path, receiver_factory, frames, entries, *recv_args, features=w.FEATURE_TREE_META, after_ack=()):
    """Runs the Python sender against a real receiver that must refuse it; returns its stderr."""
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, *recv_args)
    c = names_then_manifest(rx.port, frames, entries, features)
    if after_ack:
        assert w.read_frame(c)[0] == w.MANIFEST_ACK
        c.sendall(b"".join(after_ack))
    rc, _, err = rx.wait(timeout=120)
    c.close()
    assert rc != 0, err
    return err


@pytest.mark.parametrize("name,frames,message", HOSTILE_NAMES, ids=[h[0] for h in HOSTILE_NAMES])
def test_hostile_owner_names_are_refused(tmp_path, receiver_factory, name, frames, message):
    err = refusal(tmp_path, receiver_factory, frames, FILE_OWNED)
    assert message in err, err
    assert os.listdir(tmp_path / "dest") == []


def test_names_after_the_page_that_used_them_are_refused(tmp_path, receiver_factory):
    err = refusal(tmp_path, receiver_factory, [], FILE_OWNED, after_ack=[w.owner_names([(U, 1, b"daemon")])])
    assert "OWNER_NAMES names user id 1 after a manifest page used it" in err, err


def test_names_without_tree_metadata_are_refused(tmp_path, receiver_factory):
    err = refusal(tmp_path, receiver_factory, [w.owner_names([(U, 1, b"daemon")])], [], features=0)
    assert "OWNER_NAMES from a sender that did not announce tree metadata" in err, err


def test_names_count_against_the_manifest_memory_bound(tmp_path, receiver_factory):
    # 60,000 names of 255 bytes fit the per-kind count but not 4 MiB of receiver memory.
    names = [(U, i, b"%05d" % i + b"n" * 250) for i in range(60000)]
    err = refusal(tmp_path, receiver_factory, [w.owner_names(names[:30000]), w.owner_names(names[30000:])], FILE_OWNED,
                  "--max-manifest-bytes", "4M")
    assert "needs more than 4 MiB on the receiver" in err, err


@needs_root
def test_names_sent_by_the_model_map_by_name(tmp_path, receiver_factory):
    # The sender's 4243 is "daemon" there: daemon here. Its 4244 has no name: kept as 4244.
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    assert fake_transfer(rx.port, [(0, w.FILE, "f", 0, "", w.entry_meta(uid=NAMELESS, gid=NAMELESS + 1))],
                         before=[w.owner_names([(U, NAMELESS, b"daemon")])]) is None
    rc, _, err = rx.wait()
    assert rc == 0, err
    assert owners(dest, ["f"]) == {"f": (DAEMON, NAMELESS + 1)}


@needs_root
def test_the_senders_maps_apply_after_the_receivers_own(tmp_path, receiver_factory):
    src = owner_tree(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    send(src, dest, receiver_factory, "--usermap", "bin:sys",
         send_args=("--usermap", "daemon:nobody,bin:daemon", "--groupmap", "*:7"))
    sys_uid = pwd.getpwnam("sys").pw_uid
    assert owners(dest / "src", "dbnr") == {"d": (NOBODY, 7), "b": (sys_uid, 7), "n": (NAMELESS, 7), "r": (0, 7)}


def refused_senders_map(tmp_path, receiver_factory, send_args, why):
    """A sender's owner map the receiver cannot use: both sides fail saying why, nothing written."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"f")
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url, *send_args)
    rc, _, err = rx.wait(timeout=120)
    assert sent.returncode != 0 and rc != 0
    assert why in sent.stderr and why in err, (sent.stderr, err)
    assert os.listdir(dest) == []


def test_a_senders_map_the_receiver_cannot_use_fails_before_anything_is_written(tmp_path, receiver_factory):
    refused_senders_map(tmp_path, receiver_factory, ["--usermap", "daemon:no-such-user-here"],
                        "the sender's --usermap: 'daemon:no-such-user-here' maps to 'no-such-user-here', "
                        "which is not a user on this host")


@pytest.mark.parametrize("maps,message", [
    (struct.pack("<H", 5000) + b"x" * 5000 + struct.pack("<H", 0), "an owner map of 5000 bytes"),
    (struct.pack("<H", 3) + b"a\x00b" + struct.pack("<H", 0), "an owner map with a NUL byte"),
])
def test_hostile_maps_in_tree_options_are_refused(tmp_path, receiver_factory, maps, message):
    options = w.frame(w.TREE_OPTIONS, struct.pack("<II", w.TREE_OWNER_MAPS, 0) + maps)
    err = refusal(tmp_path, receiver_factory, [options], FILE_OWNED)
    assert message in err, err
